package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestVerifyNamesTheRenormalizeCommand: events gone from SUBSTATE_EVENTS
// while their raw evidence stays make "substate verify" exit 1 naming the
// command that maps them again; running that command as printed makes
// verify pass. (The stream's duplicate window is short here: the purged
// ids would otherwise be dropped as repeats for 10 minutes.)
func TestVerifyNamesTheRenormalizeCommand(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir(), "--dedupe-window", "1s")
	workertest.PostRows(t, w.httpURL, "t", 200)
	b := w.bus(t)
	workertest.Eventually(t, func() string { return workertest.Busy(t, b.JetStream) })
	s, err := b.JetStream.Stream(context.Background(), substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(context.Background(), jetstream.WithPurgeSubject(substate.EventsSubject("t0042"))); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, append([]string{"verify", "--server", w.httpURL}, w.natsArgs()...)...)
	command := regexp.MustCompile(`map them again with: substate renormalize --since (\S+)\n`).FindStringSubmatch(out)
	if code != 1 || command == nil || !strings.Contains(out, "1 of the 100 events it maps to are not in SUBSTATE_EVENTS") {
		t.Fatalf("verify after the purge: exit %d, want 1 with the command\n%s%s", code, out, errOut)
	}
	time.Sleep(2 * time.Second) // past the duplicate window
	if code, out, errOut := runCLI(t, append([]string{"renormalize", "--since", command[1]}, w.natsArgs()...)...); code != 0 || !strings.Contains(out, "published 1\n") {
		t.Fatalf("renormalize as verify says: exit %d\n%s%s", code, out, errOut)
	}
	workertest.Eventually(t, func() string { return workertest.Busy(t, b.JetStream) })
	if code, out, errOut := runCLI(t, append([]string{"verify", "--server", w.httpURL}, w.natsArgs()...)...); code != 0 {
		t.Fatalf("verify after renormalize: exit %d\n%s%s", code, out, errOut)
	}
}
