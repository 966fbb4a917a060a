package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

// storyOf puts the story of a few tenants on b.
func storyOf(tb testing.TB, b *bus.Bus) {
	tb.Helper()
	for i := range 3 {
		workertest.PublishStory(tb, b, fmt.Sprintf("tenant-%d", i), workertest.Story[:3+2*i])
	}
}

// workerStory runs a worker and normalizes the story of a few tenants
// through it, then waits until its view reflects every event; it returns
// the worker and a connection to its NATS.
func workerStory(tb testing.TB) (*process, *bus.Bus) {
	tb.Helper()
	p := startWorkerProcess(tb, tb.TempDir())
	b := p.bus(tb)
	storyOf(tb, b)
	waitCaughtUp(tb, p, b)
	return p, b
}

// waitCaughtUp waits until the worker's view has applied every event of
// SUBSTATE_EVENTS.
func waitCaughtUp(tb testing.TB, p *process, b *bus.Bus) {
	tb.Helper()
	workertest.Eventually(tb, func() string {
		_, last, _, err := newTestReader(b).Bounds(context.Background(), substate.StreamEvents)
		if err != nil {
			return err.Error()
		}
		var pos httpapi.ViewPosition
		if code := workertest.GetJSON(tb, p.httpURL+"/v1/view/checkpoint", &pos); code != http.StatusOK || pos.Applied != last || last == 0 {
			return fmt.Sprintf("view applied %d of %d (HTTP %d)", pos.Applied, last, code)
		}
		return ""
	})
}

func TestVerifyEqual(t *testing.T) {
	p, _ := workerStory(t)
	code, out, errOut := runCLI(t, append([]string{"verify", "--server", p.httpURL}, p.natsArgs()...)...)
	if code != 0 || !strings.Contains(out, "the live view equals the replay") || !strings.Contains(out, "3 tenants") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

// A live view that differs from the stream: verify names the tenant and
// the fields that differ, and only them, and exits 1. A running worker's
// view cannot be written from outside it (TestVerifyTamperedView in
// worker/e2e edits one in process), so here the view is the worker's,
// which applied one event more, an edit of tenant-1 published on its
// stream; and the stream verify replays is another server's, holding the
// same story without the edit.
func TestVerifyTamperedView(t *testing.T) {
	p, b := workerStory(t)
	other := newTestBus(t)
	storyOf(t, other)
	d := substate.EventData{TenantID: "tenant-1", Provider: substate.ProviderEngine, ExecutionID: "run-1",
		SubState: substate.StateError, ErrorMessage: "edited by hand", Revision: 99, RetryCount: 7, RetryCountKnown: true,
		OccurredAt: workertest.T0, ExecutionStartedAt: workertest.T0}
	d.Normalize()
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("edit-1", d)}); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, p, b)
	code, out, errOut := runCLI(t, "verify", "--server", p.httpURL, "--nats-url", other.ClientURL(), "--nats-nkey", bustest.Seed(t, other, bus.Worker))
	if code != 1 {
		t.Fatalf("verify: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"tenant tenant-1 differs",
		`workflowRetryCount     live "7", replay "1"`,
		`workflowErrorMessage   live "edited by hand", replay ""`,
		"1 of 3 tenants differ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tenant-0") || strings.Contains(out, "tenant-2") {
		t.Errorf("untouched tenants listed:\n%s", out)
	}
}

func TestVerifyEmptyView(t *testing.T) {
	p := startWorkerProcess(t, t.TempDir())
	code, out, errOut := runCLI(t, append([]string{"verify", "--server", p.httpURL}, p.natsArgs()...)...)
	if code != 0 || !strings.Contains(out, "0 tenants") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

// An event published straight on SUBSTATE_EVENTS by someone who holds
// publish rights changes the view and its replay alike, but has no raw
// evidence: verify fails and names it.
func TestVerifyCatchesForgedEvent(t *testing.T) {
	p, b := workerStory(t)
	d := substate.EventData{TenantID: "tenant-2", Provider: substate.ProviderEngine, ExecutionID: "run-1",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: workertest.T0.Add(time.Hour), ExecutionStartedAt: workertest.T0}
	d.Normalize()
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", d)}); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, p.httpURL+"/v1/tenants/tenant-2", &v); code != http.StatusOK || v.WorkflowSubState != substate.StateSucceeded {
			return fmt.Sprintf("view %d %+v", code, v)
		}
		return ""
	})
	args := append([]string{"verify", "--server", p.httpURL}, p.natsArgs()...)
	code, out, errOut := runCLI(t, args...)
	if code != 1 || !strings.Contains(out, "the live view equals the replay") || !strings.Contains(out, `tenant "tenant-2": missing`) ||
		!strings.Contains(out, "1 missing") {
		t.Fatalf("verify: exit %d, want 1 naming the forged event\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, append(args, "--no-evidence")...); code != 0 {
		t.Fatalf("verify --no-evidence: exit %d\n%s", code, out)
	}
}
