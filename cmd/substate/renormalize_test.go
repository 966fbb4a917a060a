package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestRenormalizeBesideWorker renormalizes what a running worker already
// normalized: nothing new, twice; the events stream keeps its size.
func TestRenormalizeBesideWorker(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	for _, f := range []string{"stepfunctions-running.json", "stepfunctions-failed.json"} {
		if code := workertest.PostFile(t, w.httpURL+"/v1/ingest/eventbridge", workertest.ExamplePath(t, f), nil); code != http.StatusAccepted {
			t.Fatalf("ingest %s: %d", f, code)
		}
	}
	b := w.bus(t)
	count := func() uint64 {
		_, _, n, err := newTestReader(b).Bounds(context.Background(), substate.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	workertest.Eventually(t, func() string {
		if count() != 2 {
			return "the worker has not normalized both events"
		}
		return ""
	})
	for range 2 {
		code, out, errOut := runCLI(t, "renormalize", "--nats-url", w.nats, "--nats-nkey", w.nkey)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("renormalized 2 raw messages (sequences 1 to 2) with mapping version %d: 2 events, 2 already in the events stream, published 0", mapping.Version)) {
			t.Fatalf("renormalize: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	if n := count(); n != 2 {
		t.Fatalf("events stream holds %d, want 2", n)
	}
	code, out, _ := runCLI(t, "renormalize", "--since", "1m", "--dry-run", "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if code != 0 || !strings.Contains(out, "would publish 0") {
		t.Fatalf("renormalize --dry-run: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "renormalize", "--until", "2001-01-01", "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if code != 0 || !strings.Contains(out, "no raw messages") {
		t.Fatalf("renormalize of an empty range: exit %d\n%s", code, out)
	}
}

func TestReplayCommandsHelp(t *testing.T) {
	for _, cmd := range []string{"audit", "rebuild", "verify", "renormalize"} {
		code, out, _ := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(out, "Usage: substate "+cmd) || !strings.Contains(out, "--nats-url") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out)
		}
	}
}

func TestReplayCommandsWithoutNATS(t *testing.T) {
	code, _, errOut := runCLI(t, "audit", "--tenant", "a", "--nats-url", "nats://"+workertest.FreeAddr(t))
	if code != 1 || !strings.Contains(errOut, "is \"substate run\" running?") {
		t.Fatalf("audit without nats: exit %d %s", code, errOut)
	}
}
