package consumers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// A deadline that passed while nothing projected fires only once the view
// has applied what the stream held: a tenant whose move on waits in the
// backlog is never reported stuck, one that did not move is, once.
func TestDeadlinesWaitForTheBacklog(t *testing.T) {
	ctx := context.Background()
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	slos, err := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLOBackingOff: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	view.SetSLOs(slos)
	longAgo := time.Now().Add(-2 * time.Hour)
	events := []substate.Event{engineEvent("moved", substate.StateBackingOff, 1, longAgo), engineEvent("left", substate.StateBackingOff, 1, longAgo)}
	// Between moved's backing-off and its move on, many batches of others.
	for i := range 500 {
		events = append(events, engineEvent(fmt.Sprintf("other-%03d", i), substate.StateRunning, 1, time.Now()))
	}
	events = append(events, engineEvent("moved", substate.StateRunning, 2, longAgo))
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(ctx, events); err != nil {
		t.Fatal(err)
	}

	view.ChangeOutbox = true
	p := newProjector(t, b, view, projectorConfig())
	p.BatchSize = 10
	pipelinetest.RunInBackground(t, (&publishers.ChangeFeed{JetStream: b.JetStream, Outbox: view}).Run)
	pipelinetest.RunInBackground(t, p.Run)

	pipelinetest.WaitFor(t, "left stuck", func() bool {
		v, err := view.Tenant(ctx, "left")
		return err == nil && v.Stuck
	})
	pipelinetest.WaitFor(t, "the stuck message on the feed", func() bool {
		for _, c := range bustest.Changes(t, b.JetStream) {
			if c.Change.Kind == substate.ChangeStuck && c.Change.TenantID == "left" {
				return true
			}
		}
		return false
	})
	for _, c := range bustest.Changes(t, b.JetStream) {
		if c.Change.TenantID == "moved" && c.Change.Kind != substate.ChangeFromEvent {
			t.Fatalf("moved, whose move on was in the backlog, has a %s message", substate.ChangeType(&c.Change))
		}
	}
	if v, _ := view.Tenant(ctx, "moved"); v.Stuck || !v.Deadline.IsZero() {
		t.Fatalf("moved: %+v", v)
	}
}

// A change ends the deadline its tenant held: met when its event occurred
// at or before the deadline, missed when it occurred after, though it
// reached the view before the tenant was marked stuck (here in the same
// batch as the backing-off it ends, as after a backlog). A change that
// keeps the deadline (another retry) ends none.
func TestSLOEventsByTheEventsTime(t *testing.T) {
	ctx := context.Background()
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	slos, err := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLOBackingOff: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	view.SetSLOs(slos)
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	at := func(tenant string, s substate.SubState, rev int, after time.Duration) substate.Event {
		e := engineEvent(tenant, s, uint64(rev), start)
		e.Data.OccurredAt = start.Add(after)
		return substate.NewEvent(fmt.Sprintf("%s/%d", tenant, rev), e.Data)
	}
	events := []substate.Event{
		at("in-time", substate.StateBackingOff, 1, 0),
		at("in-time", substate.StateBackingOff, 2, 5*time.Minute), // another retry: the same deadline
		at("in-time", substate.StateRunning, 3, 10*time.Minute),   // at the deadline: met
		at("late", substate.StateBackingOff, 1, 0),
		at("late", substate.StateRunning, 2, 10*time.Minute+time.Second), // a second after it: missed
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	m := consumers.NewMetrics(prometheus.NewRegistry())
	p := newProjector(t, b, view, projectorConfig())
	p.Metrics = m
	pipelinetest.RunInBackground(t, p.Run)
	pipelinetest.WaitFor(t, "the events applied", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	for _, outcome := range []string{consumers.SLOMet, consumers.SLOMissed} {
		if got := testutil.ToFloat64(m.SLOEvents.WithLabelValues(string(substate.SLOBackingOff), outcome)); got != 1 {
			t.Errorf("backing-off deadlines %s: %v, want 1", outcome, got)
		}
	}
	if v, _ := view.Tenant(ctx, "late"); v.Stuck {
		t.Errorf("late was marked stuck: %+v", v)
	}
}
