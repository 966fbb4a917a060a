package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

// Defaults of the reads and checks of failed executions.
const (
	DefaultRecheckEvery = time.Hour
	DefaultFailedQPS    = 0.5
	failedPage          = 500
	// failedMargin is how far before the newest change a listing saw the
	// next one starts: changes committed out of order by a few moments
	// are listed again rather than missed.
	failedMargin = time.Minute
)

// failure is what the reconciler remembers of a failed execution.
type failure struct {
	tenant   string
	failedAt time.Time // the view's LastEventAt when it was listed failed
	read     bool      // read after it failed, or failed before the reconciler ran
	next     time.Time // when it is read or checked next
	lastRaw  string    // the id of the raw event its last published check made
	seen     bool      // listed by the current full listing
}

// sweepFailed reads the executions that failed while the reconciler ran,
// once each, and checks the failed executions inside RecheckWindow again
// every RecheckEvery, at FailedQPS a second per provider at most: what
// does not fit waits for the next sweep, so a sweep's polls are never
// delayed by them.
func (r *Reconciler) sweepFailed(ctx context.Context, s *sweep) error {
	if r.Failed == nil {
		return nil
	}
	for _, p := range sortedProviders(r.Pollers) {
		if err := r.listFailed(ctx, p, s.start); err != nil {
			return err
		}
		if err := r.checkFailed(ctx, s, p, r.Pollers[p]); err != nil {
			return err
		}
	}
	return nil
}

// listFailed learns the provider's failed executions from the view: every
// one at the first sweep and each RecheckEvery after, else those whose
// view changed since the last listing.
func (r *Reconciler) listFailed(ctx context.Context, p substate.Provider, now time.Time) error {
	last, listed := r.failedListed[p]
	if listed && (r.RecheckWindow <= 0 || now.Sub(last) < r.recheckEvery()) {
		return r.listChangedFailed(ctx, p, now)
	}
	r.failedListed[p] = now
	for k, f := range r.failures {
		if k.provider == p {
			f.seen = false
		}
	}
	f := substate.TenantFilter{SubState: substate.StateFailed, Provider: p, Limit: failedPage}
	err := r.eachFailed(ctx, f, func(v *substate.TenantView) bool {
		r.noteFailed(p, v, now)
		return true
	})
	if err != nil {
		return err
	}
	for k, f := range r.failures {
		if k.provider == p && !f.seen {
			delete(r.failures, k)
		}
	}
	return nil
}

// listChangedFailed lists the provider's failed tenants whose view changed
// since the newest change the last listing saw (less failedMargin), newest
// change first.
func (r *Reconciler) listChangedFailed(ctx context.Context, p substate.Provider, now time.Time) error {
	from := r.failedMark[p].Add(-failedMargin)
	f := substate.TenantFilter{SubState: substate.StateFailed, Provider: p, SortUpdatedDesc: true, Limit: failedPage}
	return r.eachFailed(ctx, f, func(v *substate.TenantView) bool {
		if v.UpdatedAt.Before(from) {
			return false
		}
		r.noteFailed(p, v, now)
		return true
	})
}

// eachFailed calls fn with each tenant the filter selects, page by page,
// until fn returns false.
func (r *Reconciler) eachFailed(ctx context.Context, f substate.TenantFilter, fn func(*substate.TenantView) bool) error {
	for {
		page, err := r.Failed.Tenants(ctx, f)
		if err != nil {
			return fmt.Errorf("reconcile: list failed tenants: %w", err)
		}
		for i := range page.Tenants {
			if !fn(&page.Tenants[i]) {
				return nil
			}
		}
		if page.NextPageToken == "" {
			return nil
		}
		f.PageToken = page.NextPageToken
	}
}

// noteFailed remembers a listed failed tenant's execution. One that failed
// (again) while the reconciler ran is due for a read with its history at
// once; one that failed before is only checked again, inside
// RecheckWindow.
func (r *Reconciler) noteFailed(p substate.Provider, v *substate.TenantView, now time.Time) {
	r.failedMark[p] = maxTime(r.failedMark[p], v.UpdatedAt)
	if v.WorkflowExecutionID == "" {
		return
	}
	k := trackKey{p, v.WorkflowExecutionID}
	f := r.failures[k]
	if f != nil && f.failedAt.Equal(v.LastEventAt) {
		f.seen = true
		return
	}
	fresh := !v.UpdatedAt.Before(r.started.Add(-r.Interval))
	if !fresh && !r.inRecheckWindow(v.LastEventAt, now) {
		return
	}
	if f == nil {
		f = &failure{}
		r.failures[k] = f
	}
	f.tenant, f.failedAt, f.read, f.next, f.seen = v.TenantID, v.LastEventAt, !fresh, now, true
}

// checkFailed reads or checks the provider's due failed executions, the
// unread ones first, as far as the provider's share allows.
func (r *Reconciler) checkFailed(ctx context.Context, s *sweep, p substate.Provider, poller substate.StatusPoller) error {
	var due []trackKey
	for k, f := range r.failures {
		switch {
		case k.provider != p:
		case f.read && !r.inRecheckWindow(f.failedAt, s.start):
			delete(r.failures, k)
		case !f.next.After(s.start):
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b trackKey) int {
		fa, fb := r.failures[a], r.failures[b]
		if fa.read != fb.read {
			return cmp.Compare(boolInt(fa.read), boolInt(fb.read))
		}
		return cmp.Or(fa.next.Compare(fb.next), cmp.Compare(a.execution, b.execution))
	})
	for _, k := range due {
		if r.held(p) || !r.failedPacer(p).Allow() {
			return nil
		}
		if err := r.checkOne(ctx, s, k, poller); err != nil {
			return err
		}
	}
	return nil
}

// checkOne reads (with its history) or checks (its status only) one failed
// execution, if its tenant's view still shows it failed, and publishes
// what changed.
func (r *Reconciler) checkOne(ctx context.Context, s *sweep, k trackKey, poller substate.StatusPoller) error {
	f := r.failures[k]
	v, err := r.Failed.Tenant(ctx, f.tenant)
	switch {
	case substate.ErrorCode(err) == substate.ENOTFOUND:
		delete(r.failures, k)
		return nil
	case err != nil:
		return fmt.Errorf("reconcile: read tenant %s: %w", f.tenant, err)
	case v.WorkflowExecutionID != k.execution || v.WorkflowSubState != substate.StateFailed:
		delete(r.failures, k) // retried, replaced, or no longer failed
		return nil
	}
	s.res.Rechecked++
	raw, err := poller.Poll(ctx, k.execution, !f.read)
	if err != nil {
		return r.checkFailedErr(ctx, s, &v, k, err)
	}
	if raw.ID != f.lastRaw {
		if err := r.Publisher.PublishRaw(ctx, raw); err != nil {
			r.Metrics.CountPolls(k.provider, OutcomePublishFailed, 1)
			return fmt.Errorf("reconcile: publish the check of %s: %w", k.execution, err)
		}
		f.lastRaw = raw.ID
		s.res.Published++
	}
	r.Metrics.CountPolls(k.provider, OutcomeOK, 1)
	delete(r.holds, k.provider)
	f.read, f.next = true, r.Now().Add(r.recheckEvery())
	return nil
}

// checkFailedErr handles a failed read or check of a failed execution as
// a poll's: an execution the provider does not know is forgotten, a
// refusing provider is held (the execution stays due), anything else is
// tried again a RecheckEvery later.
func (r *Reconciler) checkFailedErr(ctx context.Context, s *sweep, v *substate.TenantView, k trackKey, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	code := substate.ErrorCode(err)
	r.Metrics.CountPolls(k.provider, code, 1)
	s.res.Failed++
	log := r.logger().With("provider", string(k.provider), "tenant", v.TenantID, "execution", k.execution, "code", code, "err", err)
	switch code {
	case substate.ENOTFOUND, substate.EINVALID:
		delete(r.failures, k)
		log.Warn("the provider cannot tell this failed execution's status; not checking it again")
	case substate.ETHROTTLED, substate.EUNAVAILABLE, substate.EUNAUTHORIZED:
		wait := r.holdProvider(k.provider, err)
		log.Warn("the provider refused to read a failed execution; trying again after the wait", "wait", wait.Round(time.Millisecond))
	default:
		r.failures[k].next = r.Now().Add(r.recheckEvery())
		log.Log(ctx, faultLevel(code), "reading a failed execution failed; trying again at its next check")
	}
	return nil
}

// inRecheckWindow reports whether an execution that failed at failedAt is
// still checked again at now.
func (r *Reconciler) inRecheckWindow(failedAt, now time.Time) bool {
	return r.RecheckWindow > 0 && now.Sub(failedAt) < r.RecheckWindow
}

// FailedBurst is how many reads and checks of failed executions may go at
// once: what FailedQPS earns in one Interval, at least one.
func (r *Reconciler) FailedBurst() int {
	return max(DefaultBurst(r.FailedQPS*cmp.Or(r.Interval, DefaultInterval).Seconds(), 1), 1)
}

func (r *Reconciler) recheckEvery() time.Duration { return cmp.Or(r.RecheckEvery, DefaultRecheckEvery) }

// failedPacer paces the reads and checks of a provider's failed
// executions: FailedQPS a second, with a burst of what one Interval earns,
// since they only take what is there when a sweep ends.
func (r *Reconciler) failedPacer(p substate.Provider) *Pacer {
	pc := r.failedPacers[p]
	if pc == nil {
		pc = NewPacer(r.FailedQPS, r.FailedBurst(), r.Now, r.Sleep)
		r.failedPacers[p] = pc
	}
	return pc
}

// sortedProviders returns the providers of pollers in a stable order.
func sortedProviders(pollers map[substate.Provider]substate.StatusPoller) []substate.Provider {
	ps := make([]substate.Provider, 0, len(pollers))
	for p := range pollers {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
