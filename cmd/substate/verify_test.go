package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
)

// workerStory runs a worker and normalizes the story of a few tenants
// through it, then waits until its view reflects every event.
func workerStory(tb testing.TB) *testWorker {
	tb.Helper()
	w := startWorker(tb, tb.TempDir())
	for i := range 3 {
		publishStory(tb, w.Bus, fmt.Sprintf("tenant-%d", i), story[:3+2*i])
	}
	eventually(tb, func() string {
		_, last, _, err := newTestReader(w.Bus).Bounds(context.Background(), substate.StreamEvents)
		if err != nil {
			return err.Error()
		}
		if got := w.View.Applied(); got != last || last == 0 {
			return fmt.Sprintf("view applied %d of %d", got, last)
		}
		return ""
	})
	return w
}

func TestVerifyEqual(t *testing.T) {
	w := workerStory(t)
	code, out, errOut := runCLI(t, "verify", "--server", w.HTTP.URL(), "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker))
	if code != 0 || !strings.Contains(out, "the live view equals the replay") || !strings.Contains(out, "3 tenants") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestVerifyTamperedView(t *testing.T) {
	w := workerStory(t)
	// Write the view directly, as a bug or a hand edit would: an event no
	// stream holds, at a sequence the projector has not reached.
	d := substate.EventData{TenantID: "tenant-1", Provider: substate.ProviderEngine, ExecutionID: "run-1",
		SubState: substate.StateError, ErrorMessage: "edited by hand", Revision: 99, RetryCount: 7, RetryCountKnown: true,
		OccurredAt: t0, ExecutionStartedAt: t0}
	d.Normalize()
	if _, err := w.View.Apply(context.Background(), []substate.Sequenced{{Seq: w.View.Applied() + 1000, Event: d}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "verify", "--server", w.HTTP.URL(), "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker))
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
	w := startWorker(t, t.TempDir())
	code, out, errOut := runCLI(t, "verify", "--server", w.HTTP.URL(), "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker))
	if code != 0 || !strings.Contains(out, "0 tenants") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

// An event published straight on SUBSTATE_EVENTS by someone who holds
// publish rights changes the view and its replay alike, but has no raw
// evidence: verify fails and names it.
func TestVerifyCatchesForgedEvent(t *testing.T) {
	w := workerStory(t)
	d := substate.EventData{TenantID: "tenant-2", Provider: substate.ProviderEngine, ExecutionID: "run-1",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: t0.Add(time.Hour), ExecutionStartedAt: t0}
	d.Normalize()
	if err := publishers.NewJetStream(w.Bus.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", d)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		if v, err := w.View.Tenant(context.Background(), "tenant-2"); err != nil || v.WorkflowSubState != substate.StateSucceeded {
			return fmt.Sprintf("view %+v, %v", v, err)
		}
		return ""
	})
	args := []string{"verify", "--server", w.HTTP.URL(), "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker)}
	code, out, errOut := runCLI(t, args...)
	if code != 1 || !strings.Contains(out, "the live view equals the replay") || !strings.Contains(out, `tenant "tenant-2": missing`) ||
		!strings.Contains(out, "1 missing") {
		t.Fatalf("verify: exit %d, want 1 naming the forged event\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, append(args, "--no-evidence")...); code != 0 {
		t.Fatalf("verify --no-evidence: exit %d\n%s", code, out)
	}
}
