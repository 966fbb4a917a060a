package consumers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// freshness returns the freshness histogram of a provider.
func freshness(tb testing.TB, m *consumers.Metrics, p substate.Provider) *dto.Histogram {
	tb.Helper()
	var out dto.Metric
	if err := m.Freshness.WithLabelValues(string(p)).(prometheus.Metric).Write(&out); err != nil {
		tb.Fatal(err)
	}
	return out.GetHistogram()
}

// below returns how many observations a histogram holds at or below le.
func below(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// TestProjectorFreshness runs the projector on a stream that already holds
// two events when it starts, as history, then applies events whose
// provider time is an hour ago, an hour ahead (a provider clock ahead of
// ours) and one that changes nothing: each change is observed once, at
// its age, history and the unchanged event are not, and the last applied
// time moves.
func TestProjectorFreshness(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	pub := publishers.NewJetStream(b.JetStream)
	ctx := context.Background()
	now := time.Now()
	event := func(tenant string, p substate.Provider, s substate.SubState, rev int, at time.Time) substate.Event {
		d := substate.EventData{TenantID: tenant, Provider: p, ExecutionID: "x-" + tenant, SubState: s,
			ExecutionStartedAt: now.Add(-2 * time.Hour), OccurredAt: at, Revision: substate.Revision(rev)}
		d.Normalize()
		return substate.NewEvent(fmt.Sprintf("%s/%d", tenant, rev), d)
	}
	history := []substate.Event{
		event("old-1", substate.ProviderRestate, substate.StateRunning, 1, now.Add(-48*time.Hour)),
		event("old-2", substate.ProviderRestate, substate.StateRunning, 1, now.Add(-48*time.Hour)),
	}
	if err := pub.PublishEvents(ctx, history); err != nil {
		t.Fatal(err)
	}
	m := consumers.NewMetrics(prometheus.NewRegistry())
	p := newProjector(t, b, view, projectorConfig())
	p.Metrics, p.HistoryUpTo = m, p.Stream.CachedInfo().State.LastSeq
	pipelinetest.RunInBackground(t, p.Run)
	pipelinetest.WaitFor(t, "the history applied", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	if got := freshness(t, m, substate.ProviderRestate).GetSampleCount(); got != 0 {
		t.Fatalf("history observed: %d observations, want 0", got)
	}
	started := time.Now()
	live := []substate.Event{
		event("sfn", substate.ProviderStepFunctions, substate.StateRunning, 1, now.Add(-time.Hour)),
		event("sfn", substate.ProviderStepFunctions, substate.StateRunning, 2, now.Add(-time.Hour)), // changes nothing
		event("restate", substate.ProviderRestate, substate.StateBackingOff, 1, now.Add(time.Hour)),
		event("old-1", substate.ProviderRestate, substate.StateSucceeded, 2, now.Add(-time.Hour)),
	}
	if err := pub.PublishEvents(ctx, live); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the live events applied", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	sfnH, restateH := freshness(t, m, substate.ProviderStepFunctions), freshness(t, m, substate.ProviderRestate)
	t.Run("OneObservationPerChange", func(t *testing.T) {
		if got, want := sfnH.GetSampleCount(), uint64(1); got != want {
			t.Errorf("stepfunctions: %d observations, want %d", got, want)
		}
		if got, want := restateH.GetSampleCount(), uint64(2); got != want {
			t.Errorf("restate: %d observations, want %d", got, want)
		}
	})
	t.Run("AtTheirAge", func(t *testing.T) {
		if got := sfnH.GetSampleSum(); got < time.Hour.Seconds() {
			t.Errorf("stepfunctions: %.0f s in all, want at least an hour", got)
		}
		if got := below(sfnH, 1800); got != 0 {
			t.Errorf("stepfunctions: %d observations at or below 30 min, want 0", got)
		}
		if got, want := below(restateH, 0.05), uint64(1); got != want {
			t.Errorf("restate: %d observations at or below 50 ms, want %d (a provider time ahead is 0)", got, want)
		}
	})
	t.Run("LastApplied", func(t *testing.T) {
		var g dto.Metric
		if err := m.LastApplied.Write(&g); err != nil {
			t.Fatal(err)
		}
		if got, want := g.GetGauge().GetValue(), float64(started.Unix()); got < want {
			t.Errorf("last applied at %.3f, before the live events were published (%.0f)", got, want)
		}
	})
}
