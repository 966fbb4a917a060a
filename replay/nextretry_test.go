package replay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
)

// TestCheckNextRetryAt: the evidence check derives a backing-off Restate
// event's next retry time again from its raw row. The genuine event is
// verified; one whose time was moved is forged, naming the field; the
// event as mapping version 4 wrote it (without the time, under that
// version's id) is unverified, as an event of every other version is.
func TestCheckNextRetryAt(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	events := genuine(t, b)
	var real replay.Event
	for _, e := range events {
		if e.Event.Data.SubState == substate.StateBackingOff && !e.Event.Data.NextRetryAt.IsZero() {
			real = e
		}
	}
	if real.Event.ID == "" {
		t.Fatal("no genuine backing-off event with a next retry time: the fixtures changed")
	}
	c := newChecker(t, b, prometheus.NewRegistry())
	if res := check(t, c); res.Failed() {
		t.Fatalf("genuine stream: %+v", res.Counts)
	}

	moved := real.Event
	moved.Data.NextRetryAt = moved.Data.NextRetryAt.Add(time.Hour)
	forge(t, b, "moved", moved, real.RawRef())

	v4 := real.Event
	v4.ID, v4.Data.MappingVersion, v4.Data.NextRetryAt = olderID(t, b, real, 4), 4, time.Time{}
	forge(t, b, "v4", v4, real.RawRef())

	res := check(t, c)
	if res.Counts[replay.CheckForged] != 1 || res.Counts[replay.CheckUnverified] != 1 || res.Counts[replay.CheckVerified] != len(events) {
		t.Fatalf("counts %v, want %d verified, 1 forged, 1 unverified", res.Counts, len(events))
	}
	for _, f := range res.Findings {
		switch f.Outcome {
		case replay.CheckForged:
			if !strings.Contains(f.Reason, "workflowNextRetryAt") {
				t.Errorf("the moved time is forged for %q, want a reason naming workflowNextRetryAt", f.Reason)
			}
		case replay.CheckUnverified:
			if !strings.Contains(f.Reason, "mapped by mapping version 4") {
				t.Errorf("the version 4 event is unverified for %q", f.Reason)
			}
		}
	}
}
