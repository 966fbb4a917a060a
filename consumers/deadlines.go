package consumers

import (
	"context"
	"errors"
	"time"

	"github.com/substatehq/substate"
)

// The deadline loop runs beside the projector's pull loop when its Store
// keeps deadlines (substate.DeadlineStore). It sleeps until the view's
// first deadline, then marks the tenants whose deadline has passed stuck,
// in the view's own transactions and through its outbox, asking no
// provider anything. It waits for the view to have caught up with
// SUBSTATE_EVENTS first: a deadline that passed while the worker was down
// fires at start only once the events stored meanwhile are applied, so a
// tenant that moved on in time is not reported stuck. With Normalized, it
// waits for the normalizer too: a deadline fires only once every raw
// message stored at or before it is normalized and its events applied.
// It also recomputes every deadline when the SLOs changed.

// Timings of the deadline loop.
const (
	// behindPoll is how often the loop looks again while the view
	// catches up.
	behindPoll = 50 * time.Millisecond
	// streamRecheck is how often, while the view seems behind and no
	// batch comes, the stream's last sequence is read again.
	streamRecheck = time.Second
	// deadlineRetry is the pause after the view refused a deadline
	// transaction.
	deadlineRetry = time.Second
	// rawPoll is how often the loop looks again while the normalizer has
	// not passed a due deadline in SUBSTATE_RAW.
	rawPoll = 100 * time.Millisecond
)

// caughtUp says whether the view has applied everything SUBSTATE_EVENTS
// held when the projector last heard from it: its applied sequence
// reaches the stream's last one (from each message's sequence and the
// number pending after it, and from the stream's info at start).
type caughtUp struct {
	applied, end uint64 // guarded by the projector: see Projector.progress
}

// noteEnd widens what the projector knows of the stream's end: the last
// sequence a message it received said the stream held.
func (p *Projector) noteEnd(end uint64) {
	if p.progress == nil {
		return // no deadline loop asks
	}
	p.mu.Lock()
	p.caught.end = max(p.caught.end, end)
	p.mu.Unlock()
}

// noteApplied records the view's applied sequence after a batch and wakes
// a deadline loop that waits for it.
func (p *Projector) noteApplied(seq uint64) {
	p.mu.Lock()
	p.caught.applied = max(p.caught.applied, seq)
	p.mu.Unlock()
	select {
	case p.progress <- struct{}{}:
	default:
	}
}

// isCaughtUp reports whether the view has applied everything the stream
// is known to hold.
func (p *Projector) isCaughtUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caught.applied >= p.caught.end
}

// readStreamEnd sets the stream's last sequence as its end, from the
// stream's info; without a stream the end is what messages said.
func (p *Projector) readStreamEnd(ctx context.Context) error {
	if p.Stream == nil {
		return nil
	}
	info, err := p.Stream.Info(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.caught.end = info.State.LastSeq
	p.mu.Unlock()
	return nil
}

// runDeadlines is the deadline loop; it returns when ctx is done. New
// SLOs are recomputed beside it, so deadlines go on firing meanwhile.
func (p *Projector) runDeadlines(ctx context.Context, ds substate.DeadlineStore) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var recheck time.Time                // when the stream's end was last read while behind
	var st firing                        // how far the next round may fire
	recomputed := make(chan struct{}, 1) // a recompute ended
	recomputing := false
	defer func() {
		if recomputing {
			<-recomputed
		}
	}()
	for ctx.Err() == nil {
		next, stale := ds.NextDeadline()
		select {
		case <-recomputed:
			recomputing = false
		default:
		}
		if stale && !recomputing {
			recomputing = true
			go func() {
				p.recompute(ctx, ds)
				recomputed <- struct{}{}
			}()
		}
		wait := time.Duration(-1) // until signalled
		now := time.Now()
		switch {
		case next.IsZero():
		case next.After(now):
			wait = next.Sub(now)
		case !p.isCaughtUp():
			if now.Sub(recheck) >= streamRecheck {
				recheck = now
				if err := p.readStreamEnd(ctx); err != nil {
					p.logger().Warn("deadlines: cannot read the event stream's end", "err", err)
				}
			}
			wait = behindPoll
		default:
			var again bool
			if wait, again = p.fire(ctx, ds, next, &st); again {
				continue
			}
		}
		if recomputing && (wait < 0 || wait > deadlineRetry) {
			wait = deadlineRetry // look whether it ended
		}
		p.sleep(ctx, timer, wait, ds.DeadlinesChanged(), wait == behindPoll)
	}
}

// firing is what the deadline loop knows of how far it may fire: with
// Normalized, a time up to which every raw message stored has been
// normalized, read before the event stream's end the view has since
// caught up with.
type firing struct {
	upTo    time.Time
	ready   bool // upTo was read, and the stream's end after it
	failing bool // the last read failed (logged once)
}

// fire marks the due tenants stuck once the view has applied every event
// normalized from the raw messages stored up to their deadline. It returns
// how long to wait, or again when the loop should look at once: more are
// due, or the view must first catch up with the stream's end read after
// SUBSTATE_RAW.
func (p *Projector) fire(ctx context.Context, ds substate.DeadlineStore, next time.Time, st *firing) (wait time.Duration, again bool) {
	var upTo time.Time // none: the clock
	if p.Normalized != nil {
		switch {
		case !st.ready:
			if !p.readNormalized(ctx, st) {
				return streamRecheck, false
			}
			return 0, true // the view must reach the end read after it
		case next.After(st.upTo):
			st.ready = false // the normalizer has not passed the deadline
			return rawPoll, false
		}
		upTo = st.upTo
	}
	if p.expire(ctx, ds, upTo) {
		return 0, true // more are due; what was read still holds
	}
	st.ready = false
	if n, _ := ds.NextDeadline(); !n.Equal(next) {
		return 0, true
	}
	return deadlineRetry, false
}

// readNormalized reads how far the normalizer has come in SUBSTATE_RAW,
// then the event stream's end, which the view must reach before a
// deadline up to there fires: the events of every raw message
// acknowledged by then are stored by then. A failure holds every deadline
// back (late, never wrong); it is logged once and counted each time.
func (p *Projector) readNormalized(ctx context.Context, st *firing) bool {
	upTo, err := p.Normalized.normalizedUpTo(ctx, time.Now())
	if err == nil && p.Stream == nil {
		err = errors.New("no event stream to read the end of")
	}
	if err == nil {
		err = p.readStreamEnd(ctx)
	}
	if err != nil {
		if m := p.Metrics; m != nil {
			m.DeadlinesHeld.Inc()
		}
		if !st.failing && ctx.Err() == nil {
			p.logger().Warn("deadlines: cannot read how far the normalizer has come; no deadline fires until it can", "err", err)
		}
		st.failing = true
		return false
	}
	if st.failing {
		p.logger().Info("deadlines: the normalizer's progress is read again; deadlines fire")
	}
	st.upTo, st.ready, st.failing = upTo, true, false
	return true
}

// sleep waits until wait passed (a negative wait: until signalled), the
// deadlines changed, the view applied a batch (when behind), or ctx is
// done.
func (p *Projector) sleep(ctx context.Context, timer *time.Timer, wait time.Duration, changed <-chan struct{}, behind bool) {
	var fire <-chan time.Time
	if wait >= 0 {
		timer.Reset(wait)
		fire = timer.C
		defer timer.Stop()
	}
	var progress <-chan struct{}
	if behind {
		progress = p.progress
	}
	select {
	case <-ctx.Done():
	case <-fire:
	case <-changed:
	case <-progress:
	}
}

// expire marks the due tenants stuck, those whose deadline is at or
// before upTo too (zero: any), and counts them; it reports whether
// more are due at once. A failure is logged and retried after a pause.
func (p *Projector) expire(ctx context.Context, ds substate.DeadlineStore, upTo time.Time) bool {
	res, more, err := ds.ExpireDeadlines(ctx, upTo, 0)
	if err != nil {
		if ctx.Err() == nil {
			p.logger().Error("deadlines: marking stuck tenants failed; retrying", "err", err)
		}
		return false
	}
	if m := p.Metrics; m != nil {
		for i := range res.Changes {
			m.SLOEvents.WithLabelValues(string(res.Changes[i].New.DeadlineSLO), SLOMissed).Inc()
		}
		if res.Committed {
			m.Commits.Inc()
			m.WrittenBytes.Add(float64(res.BytesWritten))
		}
	}
	return more
}

// recompute gives every tenant the deadline of the SLOs now in force.
func (p *Projector) recompute(ctx context.Context, ds substate.DeadlineStore) {
	start := time.Now()
	n, err := ds.RecomputeDeadlines(ctx)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		p.logger().Error("deadlines: recomputing them for the SLOs in force failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(deadlineRetry):
		}
	default:
		p.logger().Info("deadlines recomputed for the SLOs in force", "moved", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// SLO outcomes, the outcome label of substate_slo_events_total.
const (
	SLOMet    = "met"    // a change ended the deadline before it passed
	SLOMissed = "missed" // the deadline passed with no change
)

// observeSLOs counts the deadlines the batch's changes ended. A deadline
// is reckoned in the provider's times (the sub-state's and the run's
// start), and so is the change that ends it: met when its event occurred
// at or before the deadline, missed when after. A change can come after
// its deadline without the tenant having been marked stuck (the deadline
// loop waits for the view to catch up, and fires a moment after the
// deadline); a deadline the tenant is stuck on was counted missed when
// it was marked.
func (m *Metrics) observeSLOs(changes []substate.Change) {
	if m == nil {
		return
	}
	for i := range changes {
		o, n := &changes[i].Old, &changes[i].New
		if o.Deadline.IsZero() || o.Stuck || (n.Deadline.Equal(o.Deadline) && n.DeadlineSLO == o.DeadlineSLO) {
			continue
		}
		outcome := SLOMet
		if n.LastEventAt.After(o.Deadline) {
			outcome = SLOMissed
		}
		m.SLOEvents.WithLabelValues(string(o.DeadlineSLO), outcome).Inc()
	}
}
