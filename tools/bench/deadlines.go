package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/mapping"
)

// Shape of the deadlines scenario.
const (
	deadlineMeasured = 10_000           // deadlines that pass while the scenario watches, at most
	deadlineWindow   = 10 * time.Second // over which they pass: 1,000 tenants become stuck a second
	deadlineSLO      = time.Hour        // every tenant's backing-off SLO
	deadlineBudget   = time.Second      // p99 of a stuck message's delay after its deadline
	deadlineLinger   = 60 * time.Second // how long after the window the scenario waits for the last
)

// DeadlinesReport is the deadlines scenario's report: how late after its
// deadline each stuck message was stored on SUBSTATE_CHANGES, while the
// view held Tenants deadlines.
type DeadlinesReport struct {
	Tenants       int     `json:"tenants"`  // tenants holding a deadline
	Measured      int     `json:"measured"` // of them, whose deadline passed while measured
	WindowSeconds float64 `json:"windowSeconds"`
	LoadSeconds   float64 `json:"loadSeconds"` // publishing and applying every tenant's event
	// Stuck is how many stuck messages reached the feed, and Delay how
	// long after its deadline each was stored there.
	Stuck int     `json:"stuck"`
	Delay latency `json:"delay"`
	// Budget says how Delay's p99 did against 1 s. It never fails the run.
	Budget string `json:"budget"`
}

// runDeadlines runs the deadlines scenario alone and prints its report.
func (b *benchRun) runDeadlines(ctx context.Context, stdout io.Writer, progress func(string)) error {
	rep, err := b.deadlines(ctx, progress)
	if err != nil {
		return err
	}
	if b.JSON {
		return termtext.WriteJSON(stdout, rep)
	}
	rep.print(stdout)
	return nil
}

// deadlines opens a worker with an SLO file, gives --deadlines tenants a
// backing-off deadline through SUBSTATE_EVENTS (the canonical events
// published directly: the normalizer is not what is measured), most of
// them an hour away and the last deadlineMeasured spread over a window
// that starts once the view holds them all, and reads each stuck message
// the change feed stores.
func (b *benchRun) deadlines(ctx context.Context, progress func(string)) (_ *DeadlinesReport, err error) {
	dir := filepath.Join(b.root, "deadlines")
	slo := filepath.Join(b.root, "deadlines-slo.yaml")
	if err := os.MkdirAll(b.root, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(slo, []byte("workflows:\n  \"*\":\n    backing-off: 1h\n"), 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(slo)
	f := b.Flags
	f.SLOFile, f.ChangeFeed = slo, true
	p, err := openPipeline(ctx, f, b.logs, dir, b.BatchSize, 1)
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, p.close(b.Keep)) }()
	p.w.Projector.Store = p.view // the view itself: it keeps the deadlines
	stop := p.run(p.project, p.feed)
	defer func() { err = firstErr(err, stop()) }()

	rep := &DeadlinesReport{Tenants: b.Deadlines, Measured: min(b.Deadlines, deadlineMeasured), WindowSeconds: deadlineWindow.Seconds()}
	progress(fmt.Sprintf("deadlines: %d tenants backing off, an hour from their deadline", rep.Tenants-rep.Measured))
	start := time.Now()
	holders := make([]substate.Event, 0, rep.Tenants-rep.Measured)
	for i := range rep.Tenants - rep.Measured {
		holders = append(holders, deadlineEvent(i, start))
	}
	if err := b.publishApplied(ctx, p, holders); err != nil {
		return nil, err
	}
	// The measured deadlines start once their events are surely applied:
	// at the rate the holders went in, with a margin.
	rate := float64(len(holders)+1) / time.Since(start).Seconds()
	t0 := time.Now().Add(2*time.Second + time.Duration(float64(rep.Measured)/rate*float64(time.Second)))
	progress(fmt.Sprintf("deadlines: %d more whose deadlines pass in %s from %s", rep.Measured, deadlineWindow, t0.Format(time.TimeOnly)))
	sub, err := subscribeStuck(ctx, p.w.Bus.JetStream)
	if err != nil {
		return nil, err
	}
	defer sub.Stop()
	measured := make([]substate.Event, rep.Measured)
	for i := range measured {
		at := t0.Add(time.Duration(i) * deadlineWindow / time.Duration(rep.Measured))
		measured[i] = deadlineEvent(len(holders)+i, at.Add(-deadlineSLO))
	}
	if err := b.publishApplied(ctx, p, measured); err != nil {
		return nil, err
	}
	rep.LoadSeconds = time.Since(start).Seconds()
	delays, err := collectStuck(ctx, sub, rep.Measured, t0.Add(deadlineWindow+deadlineLinger))
	if err != nil {
		return nil, err
	}
	rep.Stuck, rep.Delay = len(delays), latencyOf(delays)
	rep.judge()
	return rep, nil
}

// deadlineEvent is tenant i entering backing-off at since.
func deadlineEvent(i int, since time.Time) substate.Event {
	d := substate.EventData{TenantID: fmt.Sprintf("tenant-%07d", i), Provider: substate.ProviderRestate, ExecutionID: fmt.Sprintf("inv_%07d", i),
		Workflow: "provision", SubState: substate.StateBackingOff, ProviderState: "backing-off", ErrorMessage: "downstream unavailable",
		OccurredAt: since.UTC(), ExecutionStartedAt: since.UTC().Add(-time.Minute), Revision: 1, MappingVersion: mapping.Version}
	d.Normalize()
	return substate.NewEvent(fmt.Sprintf("deadline-%d", i), d)
}

// publishApplied publishes events on SUBSTATE_EVENTS and waits until the
// view has applied everything the stream holds.
func (b *benchRun) publishApplied(ctx context.Context, p *benchPipeline, events []substate.Event) error {
	for len(events) > 0 {
		n := min(len(events), 10_000)
		if err := p.pub.PublishEvents(ctx, events[:n]); err != nil {
			return err
		}
		events = events[n:]
	}
	s, err := p.w.Bus.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	return waitCount(ctx, info.State.LastSeq, time.Minute, "the view applied", func() (uint64, bool, error) {
		cp, err := p.view.Checkpoint(ctx)
		return cp, true, err
	})
}

// subscribeStuck consumes the stuck messages SUBSTATE_CHANGES stores from
// now on.
func subscribeStuck(ctx context.Context, js jetstream.JetStream) (jetstream.MessagesContext, error) {
	c, err := js.OrderedConsumer(ctx, substate.StreamChanges, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{substate.SubjectChangesPrefix + ">"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, err
	}
	return c.Messages()
}

// collectStuck reads stuck messages until want arrived or until, and
// returns how long after its deadline each was stored.
func collectStuck(ctx context.Context, it jetstream.MessagesContext, want int, until time.Time) ([]time.Duration, error) {
	delays := make([]time.Duration, 0, want)
	for len(delays) < want && time.Now().Before(until) {
		m, err := it.Next(jetstream.NextMaxWait(time.Until(until)))
		if err != nil {
			break // the wait ended: what arrived is the answer
		}
		e, err := substate.UnmarshalChangeEvent(m.Data())
		if err != nil {
			return nil, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		if e.Type == substate.ChangeTypeStuck {
			delays = append(delays, meta.Timestamp.Sub(e.Data.New.StuckSince))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return delays, nil
}

// judge sets r.Budget.
func (r *DeadlinesReport) judge() {
	switch {
	case r.Stuck < r.Measured:
		r.Budget = fmt.Sprintf("missed: %d of %d stuck messages arrived", r.Stuck, r.Measured)
	case r.Tenants < 100_000:
		r.Budget = "not judged: the budget is for 100000 tenants holding deadlines"
	case r.Delay.P99 > float64(deadlineBudget.Milliseconds()):
		r.Budget = fmt.Sprintf("missed: p99 %.0f ms", r.Delay.P99)
	default:
		r.Budget = "met"
	}
}

func (r *DeadlinesReport) print(w io.Writer) {
	fmt.Fprintf(w, "deadlines: %d tenants holding a deadline, loaded in %.1f s; %d deadlines passed over %.0f s\n",
		r.Tenants, r.LoadSeconds, r.Measured, r.WindowSeconds)
	fmt.Fprintf(w, "stuck messages on %s: %d; stored after their deadline: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		substate.StreamChanges, r.Stuck, r.Delay.P50, r.Delay.P99, r.Delay.Max)
	fmt.Fprintf(w, "budget, p99 ≤ 1 s at 100000 tenants: %s\n", r.Budget)
}
