package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

func TestAuditGolden(t *testing.T) {
	b := newTestBus(t)
	workertest.PublishStory(t, b, "acme corp", workertest.Story)
	publishMsg(t, b, substate.EventsSubject("acme corp"), "{not a cloudevent")
	workertest.PublishStory(t, b, "other", workertest.Story[:1])
	url, nkey := b.ClientURL(), bustest.Seed(t, b, bus.Worker)

	code, out, errOut := runCLI(t, "audit", "--tenant", "acme corp", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	golden(t, "audit.txt", out)
	code, out, errOut = runCLI(t, "audit", "--tenant", "acme corp", "--raw", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit --raw: exit %d: %s", code, errOut)
	}
	golden(t, "audit-raw.txt", out)

	workertest.PublishStory(t, b, "hooli", workertest.Rerun)
	code, out, errOut = runCLI(t, "audit", "--tenant", "hooli", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	golden(t, "audit-rerun.txt", out)

	code, out, _ = runCLI(t, "audit", "--tenant", "acme corp", "--json", "--raw", "--nats-url", url, "--nats-nkey", nkey)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(workertest.Story)+1 {
		t.Fatalf("audit --json: exit %d, %d lines", code, len(lines))
	}
	var last substate.Transition // of the story; the invalid message follows it
	if err := json.Unmarshal([]byte(lines[len(lines)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Outcome != substate.OutcomeStale || last.New.SubState != substate.StateRunning || last.Raw == nil || last.Raw.Missing != "" {
		t.Errorf("last transition %+v", last)
	}
}

func TestAuditRanges(t *testing.T) {
	b := newTestBus(t)
	workertest.PublishStory(t, b, "acme", workertest.Story)
	url, nkey := b.ClientURL(), bustest.Seed(t, b, bus.Worker)
	code, out, _ := runCLI(t, "audit", "--tenant", "acme", "--since", "1h", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 || !strings.Contains(out, "acme: 9 events") {
		t.Fatalf("--since 1h: exit %d\n%s", code, out)
	}
	code, _, errOut := runCLI(t, "audit", "--tenant", "acme", "--until", "2001-01-01", "--nats-url", url, "--nats-nkey", nkey)
	if code != 1 || !strings.Contains(errOut, "no events of tenant") {
		t.Fatalf("--until before everything: exit %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "audit", "--tenant", "acme", "--since", "last tuesday", "--nats-url", url, "--nats-nkey", nkey)
	if code != 1 || !strings.Contains(errOut, "--since") {
		t.Fatalf("bad --since: exit %d %s", code, errOut)
	}
}
