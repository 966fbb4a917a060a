package consumers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
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
