package consumers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// deadlineRig is a projector with a backing-off SLO, its change feed and
// metrics, waiting for the normalizer as the worker's does.
type deadlineRig struct {
	b       *bus.Bus
	view    *state.DB
	metrics *consumers.Metrics
}

// newDeadlineRig runs a projector whose backing-off SLO is slo and whose
// deadlines wait for the normalizer's consumer on SUBSTATE_RAW.
func newDeadlineRig(t *testing.T, slo time.Duration, events ...substate.Event) *deadlineRig {
	t.Helper()
	ctx := context.Background()
	r := &deadlineRig{b: newBus(t), view: pipelinetest.OpenView(t), metrics: consumers.NewMetrics(prometheus.NewRegistry())}
	slos, err := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLOBackingOff: slo}})
	if err != nil {
		t.Fatal(err)
	}
	r.view.SetSLOs(slos)
	r.view.ChangeOutbox = true
	if err := publishers.NewJetStream(r.b.JetStream).PublishEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	raw, err := r.b.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	p := newProjector(t, r.b, r.view, projectorConfig())
	p.Metrics, p.Normalized = r.metrics, &consumers.Normalized{Raw: raw, Consumer: bus.ConsumerNormalizer}
	pipelinetest.RunInBackground(t, (&publishers.ChangeFeed{JetStream: r.b.JetStream, Outbox: r.view}).Run)
	pipelinetest.RunInBackground(t, p.Run)
	return r
}

// ensureNormalizerConsumer declares the normalizer's consumer without
// running a normalizer: what is stored on SUBSTATE_RAW waits.
func (r *deadlineRig) ensureNormalizerConsumer(t *testing.T) {
	t.Helper()
	if _, err := bus.EnsureConsumer(context.Background(), r.b.JetStream, substate.StreamRaw, bus.ConsumerConfig(bus.ConsumerNormalizer, 30*time.Second, 1)); err != nil {
		t.Fatal(err)
	}
}

// publishEngine stores an engine status of tenant's execution run-1 on
// SUBSTATE_RAW, as the engine or the ingress would.
func (r *deadlineRig) publishEngine(tb testing.TB, tenant, status string, seq uint64, started, at time.Time) {
	tb.Helper()
	if err := r.tryPublishEngine(tenant, status, seq, started, at); err != nil {
		tb.Fatal(err)
	}
}

// tryPublishEngine is publishEngine for another goroutine than the test's.
func (r *deadlineRig) tryPublishEngine(tenant, status string, seq uint64, started, at time.Time) error {
	body, err := json.Marshal(substate.EngineEvent{ID: fmt.Sprintf("run-1/%d", seq), TenantID: tenant, ExecutionID: "run-1",
		Workflow: "provision", Seq: seq, Status: status, Attempt: 1, StartedAt: started, Time: at})
	if err != nil {
		return err
	}
	m := nats.NewMsg(substate.RawSubject(substate.RawEngine))
	m.Data = body
	m.Header.Set(substate.HeaderMsgID, fmt.Sprintf("%s/%d", tenant, seq))
	_, err = r.b.JetStream.PublishMsg(context.Background(), m)
	return err
}

// tenant reads a tenant's view.
func (r *deadlineRig) tenant(t *testing.T, id string) substate.TenantView {
	t.Helper()
	v, err := r.view.Tenant(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// is reports whether a tenant is in the view and ok says yes to it.
func (r *deadlineRig) is(id string, ok func(substate.TenantView) bool) func() bool {
	return func() bool {
		v, err := r.view.Tenant(context.Background(), id)
		return err == nil && ok(v)
	}
}

// feedKinds returns the kinds of a tenant's messages on the change feed.
func (r *deadlineRig) feedKinds(t *testing.T, tenant string) []substate.ChangeKind {
	t.Helper()
	var out []substate.ChangeKind
	for _, c := range bustest.Changes(t, r.b.JetStream) {
		if c.Change.TenantID == tenant {
			out = append(out, c.Change.Kind)
		}
	}
	return out
}

// slo reads substate_slo_events_total for backing-off.
func (r *deadlineRig) slo(outcome string) float64 {
	return testutil.ToFloat64(r.metrics.SLOEvents.WithLabelValues(string(substate.SLOBackingOff), outcome))
}

// A tenant whose move on was stored on SUBSTATE_RAW before its deadline,
// and not yet normalized when the deadline passes (the normalizer down),
// is not reported stuck: its deadline waits for the normalizer, and the
// move on, which occurred in time, meets it.
func TestDeadlinesWaitForTheNormalizer(t *testing.T) {
	deadline := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	started := deadline.Add(-time.Minute - time.Second) // engineEvent's seq 1 occurs a second after started
	r := newDeadlineRig(t, time.Minute, engineEvent("moved", substate.StateBackingOff, 1, started))
	r.ensureNormalizerConsumer(t)
	pipelinetest.WaitFor(t, "moved's deadline", r.is("moved", func(v substate.TenantView) bool { return v.Deadline.Equal(deadline) }))
	r.publishEngine(t, "moved", substate.EngineRunning, 2, started, time.Now())
	if time.Now().After(deadline) {
		t.Skip("the machine is too slow: the move on was stored after the deadline")
	}

	// The deadline passes; the move on waits on SUBSTATE_RAW.
	for watch := deadline.Add(1500 * time.Millisecond); time.Now().Before(watch); time.Sleep(10 * time.Millisecond) {
		if v := r.tenant(t, "moved"); v.Stuck {
			t.Fatalf("moved was reported stuck while its move on waited to be normalized: %+v", v)
		}
	}

	pipelinetest.RunNormalizer(t, r.b, nil)
	pipelinetest.WaitFor(t, "moved running", r.is("moved", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning }))
	pipelinetest.WaitFor(t, "the change on the feed", func() bool { return len(r.feedKinds(t, "moved")) == 2 })
	if got, want := r.feedKinds(t, "moved"), []substate.ChangeKind{substate.ChangeFromEvent, substate.ChangeFromEvent}; !slices.Equal(got, want) {
		t.Errorf("moved's messages: %v, want %v (no stuck, no unstuck)", got, want)
	}
	if got, want := r.slo(consumers.SLOMet), 1.0; got != want {
		t.Errorf("backing-off met: %v, want %v", got, want)
	}
	if got := r.slo(consumers.SLOMissed); got != 0 {
		t.Errorf("backing-off missed: %v, want 0", got)
	}
}

// A tenant that did not move on is reported stuck while other raw traffic
// flows steadily: SUBSTATE_RAW is never empty, but the normalizer passes
// the deadline.
func TestDeadlinesFireUnderSteadyIngest(t *testing.T) {
	deadline := time.Now().Add(time.Second)
	r := newDeadlineRig(t, time.Minute, engineEvent("left", substate.StateBackingOff, 1, deadline.Add(-time.Minute-time.Second)))
	pipelinetest.RunNormalizer(t, r.b, nil)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	published := 0
	var perr error
	wg.Go(func() {
		for ; ctx.Err() == nil && perr == nil; published++ {
			tenant := fmt.Sprintf("other-%d", published%50)
			perr = r.tryPublishEngine(tenant, substate.EngineRunning, uint64(published/50+1), deadline.Add(-time.Hour), time.Now())
			time.Sleep(2 * time.Millisecond)
		}
	})
	defer func() { stop(); wg.Wait() }()

	pipelinetest.WaitFor(t, "left stuck", r.is("left", func(v substate.TenantView) bool { return v.Stuck }))
	pipelinetest.WaitFor(t, "the stuck message on the feed", func() bool {
		kinds := r.feedKinds(t, "left")
		return len(kinds) == 2 && kinds[1] == substate.ChangeStuck
	})
	stop()
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	if published < 100 {
		t.Errorf("%d raw messages published meanwhile: not a steady ingest", published)
	}
	r.waitMissed(t)
	if v := r.tenant(t, "left"); !v.StuckSince.Equal(v.Deadline) || v.Deadline.IsZero() {
		t.Errorf("stuck since %v, want its deadline %v", v.StuckSince, v.Deadline)
	}
}

// Without the normalizer's progress (its consumer cannot be read), no
// deadline fires: late, never wrong. It is counted, and the deadline
// fires once the progress can be read.
func TestDeadlinesHeldWithoutTheNormalizersProgress(t *testing.T) {
	r := newDeadlineRig(t, time.Minute, engineEvent("left", substate.StateBackingOff, 1, time.Now().Add(-2*time.Hour)))
	pipelinetest.WaitFor(t, "left's deadline", r.is("left", func(v substate.TenantView) bool { return !v.Deadline.IsZero() }))
	pipelinetest.WaitFor(t, "a held round", func() bool { return testutil.ToFloat64(r.metrics.DeadlinesHeld) >= 2 })
	if v := r.tenant(t, "left"); v.Stuck || v.Deadline.IsZero() {
		t.Fatalf("left without the normalizer's progress: %+v", v)
	}
	r.ensureNormalizerConsumer(t)
	pipelinetest.WaitFor(t, "left stuck", r.is("left", func(v substate.TenantView) bool { return v.Stuck }))
	// The miss is counted after the commit that marked left stuck.
	r.waitMissed(t)
}

// waitMissed waits for one backing-off deadline counted missed: the
// deadline loop counts it once the commit that marks the tenant stuck
// returns, so a reader of the view can see it stuck a moment before.
func (r *deadlineRig) waitMissed(t *testing.T) {
	t.Helper()
	pipelinetest.WaitFor(t, "the missed deadline counted", func() bool { return r.slo(consumers.SLOMissed) >= 1 })
	if got := r.slo(consumers.SLOMissed); got != 1 {
		t.Errorf("backing-off missed: %v, want 1", got)
	}
}
