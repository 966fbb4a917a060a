package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
)

// TestActivity counts the canonical events SUBSTATE_EVENTS holds by
// sub-state, reads only what arrived since its last read, and starts over
// from the stream after a restart with the same counts.
func TestActivity(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	seq := 0
	publish := func(subStates ...substate.SubState) {
		t.Helper()
		var events []substate.Event
		for _, s := range subStates {
			seq++
			d := substate.EventData{TenantID: fmt.Sprintf("acme-%d", seq), Provider: substate.ProviderEngine, ExecutionID: "x",
				SubState: s, Revision: 1, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
			d.Normalize()
			events = append(events, substate.NewEvent(fmt.Sprintf("e-%d", seq), d))
		}
		if err := publishers.NewJetStream(b.JetStream).PublishEvents(ctx, events); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Now()
	now := func() time.Time { return clock }
	total := func(a Activity) map[substate.SubState]int {
		out := map[substate.SubState]int{}
		for _, m := range a.Minutes {
			for s, n := range m.Counts {
				out[s] += n
			}
		}
		return out
	}

	publish(substate.StateRunning, substate.StateRunning, substate.StateFailed)
	a := &activity{js: b.JetStream, now: now}
	got := a.read(ctx)
	if c := total(got); c[substate.StateRunning] != 2 || c[substate.StateFailed] != 1 || len(got.Minutes) != 60 || got.Truncated || got.Error != "" {
		t.Fatalf("first read: %v, %d minutes, truncated %v, error %q", c, len(got.Minutes), got.Truncated, got.Error)
	}

	publish(substate.StateError)
	if c := total(a.read(ctx)); c[substate.StateError] != 0 {
		t.Fatalf("a read within %s read the stream again: %v", activityRefresh, c)
	}
	clock = clock.Add(activityRefresh)
	if c := total(a.read(ctx)); c[substate.StateRunning] != 2 || c[substate.StateFailed] != 1 || c[substate.StateError] != 1 {
		t.Fatalf("second read: %v", c)
	}

	restarted := &activity{js: b.JetStream, now: now}
	if c := total(restarted.read(ctx)); c[substate.StateRunning] != 2 || c[substate.StateFailed] != 1 || c[substate.StateError] != 1 {
		t.Fatalf("after a restart: %v", c)
	}

	t.Run("Truncated", func(t *testing.T) {
		a := &activity{js: b.JetStream, now: now, budget: 2}
		got := a.read(ctx)
		if c := total(got); c[substate.StateFailed] != 1 || c[substate.StateError] != 1 || c[substate.StateRunning] != 0 || !got.Truncated {
			t.Fatalf("with a budget of 2: %v, truncated %v", c, got.Truncated)
		}
		// An hour on, the events skipped are out of the window.
		clock = clock.Add(activityWindow + time.Minute)
		if got := a.read(ctx); got.Truncated {
			t.Fatal("still truncated once the skipped events are older than the window")
		}
	})
}
