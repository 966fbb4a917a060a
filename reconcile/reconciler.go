package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// Defaults of a Reconciler made by NewReconciler.
const (
	DefaultAfter     = 0
	DefaultInterval  = 15 * time.Second
	DefaultPollEvery = 15 * time.Second
	DefaultQPS       = 10.0
	minSweepWait     = 100 * time.Millisecond
)

// Reconciler polls the providers' running executions. Events can be lost,
// arrive a day late, or never be sent (a Step Functions execution backing
// off between retries sends none), so the reconciler asks a provider for
// the current status of every non-terminal execution, with its history,
// every Every, and publishes the answer on SUBSTATE_RAW, where the
// normalizer and the projector treat it like any event. An answer whose
// raw event id is that of the execution's last published one (nothing
// changed) is not sent again. It never writes
// the view: the projection's order rules decide whether a poll result is
// newer than what the view holds, so a late poll cannot regress it.
//
// Each sweep lists the non-terminal tenants (those whose last event is
// older than After, when After is set) and polls the executions whose last
// poll (or failed try) is at least Every old, in turn: the one whose last
// try is oldest first, so when the provider's budget cannot cover every
// execution each Every the polls are spread evenly and each execution
// waits the same, and an execution whose poll failed goes to the back of
// the line instead of blocking the others. How late the most overdue
// execution is, is the lag metric. Sweeps start when the next execution
// is due, and at least every Interval. Calls are paced per provider to QPS
// a second (the Step Functions provider paces its own calls, see
// stepfunctions.Budget).
//
// Failures never stop it. An execution the provider does not know
// (ENOTFOUND) or whose id it rejects (EINVALID) is logged once and not
// polled again while the view keeps it. A throttled, unavailable or
// unauthorized provider is logged and held: none of its executions is
// polled until the wait its error asks for (substate.RetryAfter) or, when
// it asks for none, a backoff with jitter that grows with each refusal in
// a row, up to Every. The execution is tried again an Every after its
// failed try, as is one whose poll failed otherwise.
//
// Set the fields before Run; NewReconciler sets the defaults.
type Reconciler struct {
	// View lists the stale non-terminal tenants.
	View substate.ActiveLister
	// Pollers holds the poller of each provider the reconciler asks;
	// tenants of other providers are left alone.
	Pollers map[substate.Provider]substate.StatusPoller
	// Publisher puts poll results on SUBSTATE_RAW.
	Publisher substate.RawPublisher
	// After, when positive, limits the polls to the tenants whose last
	// event is older than After.
	After time.Duration
	// Interval is the longest wait between two sweeps.
	Interval time.Duration
	// Every is how often each execution is polled.
	Every time.Duration
	// QPS is how many polls a second each provider gets; 0 or less means
	// no limit.
	QPS float64
	// Burst is how many polls may go at once after a quiet spell; 0 means
	// one second's worth.
	Burst int
	// Now is the clock sweeps are timed with.
	Now func() time.Time
	// Sleep waits for a duration or until ctx is done; the pacing and the
	// sweep interval use it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0,1) that spreads the backoff of a
	// provider that refused polls; nil is math/rand/v2's.
	Rand func() float64
	// Failed, when set, lists the failed tenants of the providers in
	// Pollers. An execution the view shows failed while the reconciler
	// runs is read once, with its history (a terminal event says nothing of
	// the retries before it); with RecheckWindow, failed executions are
	// checked again, for a retry done outside substate whose event was
	// lost. Both go at FailedQPS a second per provider, after the sweep's
	// polls.
	Failed substate.TenantQuerier
	// RecheckWindow is how long after its failure an execution is checked
	// again (Step Functions: 14 days, while it can be redriven); 0 checks
	// none.
	RecheckWindow time.Duration
	// RecheckEvery is how often each failed execution inside
	// RecheckWindow is checked (its status only); 0 means
	// DefaultRecheckEvery.
	RecheckEvery time.Duration
	// FailedQPS is how many reads and checks of failed executions a
	// second each provider gets; 0 or less means no limit.
	FailedQPS float64
	// Metrics receives poll outcomes; nil disables them.
	Metrics *Metrics
	// Logger receives the reconciler's logs; nil discards them.
	Logger *slog.Logger

	mu      sync.Mutex // one sweep at a time
	tracked map[trackKey]*tracked
	pacers  map[substate.Provider]*Pacer
	holds   map[substate.Provider]*hold
	started time.Time // when the first sweep began

	failures     map[trackKey]*failure
	failedListed map[substate.Provider]time.Time // the last full listing of failed tenants
	failedMark   map[substate.Provider]time.Time // the newest view change a listing saw
	failedPacers map[substate.Provider]*Pacer
	warned       map[substate.Provider]bool // providers without a poller, logged once
	lagging      map[substate.Provider]bool // providers whose polls lag, logged on change
	nextDue      time.Time                  // when the next tracked execution is due
}

// NewReconciler returns a reconciler with the default settings.
func NewReconciler(view substate.ActiveLister, pollers map[substate.Provider]substate.StatusPoller, pub substate.RawPublisher) *Reconciler {
	return &Reconciler{
		View: view, Pollers: pollers, Publisher: pub,
		After: DefaultAfter, Interval: DefaultInterval, Every: DefaultPollEvery,
		QPS: DefaultQPS, Now: time.Now, Sleep: timex.Sleep,
	}
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Stale     int // non-terminal tenants listed as stale
	Polled    int // executions asked about
	Published int // poll results published on SUBSTATE_RAW (one unchanged since the last is not)
	Failed    int // executions whose poll failed
	NotDue    int // executions polled less than Every ago
	Deferred  int // due executions left for the next sweep: their provider refused
	Unpolled  int // stale tenants no poller asks about (no poller, or given up)
	Rechecked int // failed executions read or checked again
}

// trackKey names one execution of one provider.
type trackKey struct {
	provider  substate.Provider
	execution string
}

// tracked is what the reconciler remembers of one execution between
// sweeps. It is forgotten once a sweep no longer lists the execution.
type tracked struct {
	firstSeen time.Time // when a sweep first listed it
	lastPoll  time.Time // when it was last polled
	lastTry   time.Time // when a poll of it last ended, failed or not
	lastRaw   string    // the id of the raw event its last published poll made
	gaveUp    string    // the code of a permanent failure: no more polls
	seen      bool      // listed by the current sweep
}

// sweep is the state of one sweep.
type sweep struct {
	start time.Time
	stale map[substate.Provider]int
	due   []dueExecution
	res   SweepResult
}

// dueExecution is an execution a sweep polls.
type dueExecution struct {
	view    substate.TenantView
	poller  substate.StatusPoller
	tracked *tracked
}

// Run sweeps every Interval until ctx is done. A failed sweep is logged
// and the next one tries again; Run returns nil when ctx is done, and an
// error only for a reconciler without a view or publisher.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.View == nil || r.Publisher == nil {
		return errors.New("reconciler: no view or no publisher")
	}
	r.mu.Lock()
	r.init()
	r.mu.Unlock()
	return Sweeps{Now: r.Now, Sleep: r.Sleep, Sweep: r.Sweep, Next: r.next}.Run(ctx)
}

// next logs a sweep and returns the wait before the next one.
func (r *Reconciler) next(res SweepResult, err error, took time.Duration) time.Duration {
	if err != nil {
		r.logger().Error("reconcile sweep failed; the next sweep retries", "err", err)
	}
	r.logger().Debug("reconcile sweep", "stale", res.Stale, "polled", res.Polled, "published", res.Published,
		"failed", res.Failed, "deferred", res.Deferred, "rechecked", res.Rechecked, "took", took)
	return r.wait(took)
}

// Sweep polls the stale executions that are due once, and returns what it
// did. It returns an error when the view cannot be listed, a result cannot
// be published, or ctx is done; poll failures are handled as the type
// documentation says and do not end the sweep.
func (r *Reconciler) Sweep(ctx context.Context) (SweepResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	s := sweep{start: r.Now(), stale: map[substate.Provider]int{}}
	for v, err := range r.View.Active(ctx, s.start.Add(-max(r.After, 0))) {
		if err != nil {
			return s.res, fmt.Errorf("reconcile: list running tenants: %w", err)
		}
		r.visit(&s, &v)
	}
	r.forget()
	slices.SortStableFunc(s.due, func(a, b dueExecution) int { return a.tracked.lastTry.Compare(b.tracked.lastTry) })
	for i := range s.due {
		if err := r.pollDue(ctx, &s, &s.due[i]); err != nil {
			return s.res, err
		}
	}
	if err := r.sweepFailed(ctx, &s); err != nil {
		return s.res, err
	}
	for p := range r.Pollers {
		r.Metrics.SetStale(p, s.stale[p])
	}
	r.measureLag()
	r.Metrics.ObserveSweep("reconciler", r.Now().Sub(s.start))
	return s.res, nil
}

// visit decides what to do with one listed tenant: its execution is due
// when its last poll is at least Every old.
func (r *Reconciler) visit(s *sweep, v *substate.TenantView) {
	s.res.Stale++
	s.stale[v.Provider]++
	poller := r.Pollers[v.Provider]
	if poller == nil || v.WorkflowExecutionID == "" {
		s.res.Unpolled++
		r.warnNoPoller(v.Provider)
		return
	}
	t := r.track(trackKey{v.Provider, v.WorkflowExecutionID}, s.start)
	switch {
	case t.gaveUp != "":
		s.res.Unpolled++
	case !due(t.lastTry, s.start, r.Every):
		s.res.NotDue++
	default:
		s.due = append(s.due, dueExecution{view: *v, poller: poller, tracked: t})
	}
}

// pollDue polls one due execution, unless its provider is held.
func (r *Reconciler) pollDue(ctx context.Context, s *sweep, d *dueExecution) error {
	if r.held(d.view.Provider) {
		s.res.Deferred++
		return nil
	}
	return r.poll(ctx, s, &d.view, d.poller, d.tracked)
}

// poll asks the provider about one execution, with its history, and
// publishes the answer.
func (r *Reconciler) poll(ctx context.Context, s *sweep, v *substate.TenantView, poller substate.StatusPoller, t *tracked) error {
	if err := r.pacer(v.Provider).Wait(ctx, 1); err != nil {
		return err
	}
	s.res.Polled++
	raw, err := poller.Poll(ctx, v.WorkflowExecutionID, true)
	if err != nil {
		t.lastTry = r.Now()
		return r.pollFailed(ctx, s, v, t, err)
	}
	delete(r.holds, v.Provider)
	if raw.ID != t.lastRaw {
		if err := r.Publisher.PublishRaw(ctx, raw); err != nil {
			r.Metrics.CountPolls(v.Provider, OutcomePublishFailed, 1)
			return fmt.Errorf("reconcile: publish the poll of %s: %w", v.WorkflowExecutionID, err)
		}
		t.lastRaw = raw.ID
		s.res.Published++
	}
	r.Metrics.CountPolls(v.Provider, OutcomeOK, 1)
	t.lastPoll = r.Now()
	t.lastTry = t.lastPoll
	return nil
}

// pollFailed counts and logs a failed poll and decides what follows.
func (r *Reconciler) pollFailed(ctx context.Context, s *sweep, v *substate.TenantView, t *tracked, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	code := substate.ErrorCode(err)
	r.Metrics.CountPolls(v.Provider, code, 1)
	s.res.Failed++
	log := r.logger().With("provider", string(v.Provider), "tenant", v.TenantID, "execution", v.WorkflowExecutionID, "code", code, "err", err)
	switch code {
	case substate.ENOTFOUND, substate.EINVALID:
		t.gaveUp = code
		log.Warn("the provider cannot tell this execution's status; not polling it again while the view keeps it")
	case substate.ETHROTTLED, substate.EUNAVAILABLE, substate.EUNAUTHORIZED:
		wait := r.holdProvider(v.Provider, err)
		log.Warn("the provider refused a poll; none of its executions is polled before the wait, then each in turn", "wait", wait.Round(time.Millisecond))
	default:
		log.Log(ctx, faultLevel(code), "poll failed; the next sweep retries")
	}
	return nil
}

// faultLevel is the level of a failure about one tenant's execution: error
// when it is substate's own (an internal error), warn when the provider
// answered something substate could not use; a provider's trouble with
// one tenant is not a fault of substate's.
func faultLevel(code string) slog.Level {
	if code == substate.EINTERNAL {
		return slog.LevelError
	}
	return slog.LevelWarn
}

// due reports whether something last done at last (zero: never) is due
// again at now, every period.
func due(last, now time.Time, every time.Duration) bool {
	return last.IsZero() || !last.After(now.Add(-every))
}

// track returns the memory of an execution, marked as seen by this sweep.
func (r *Reconciler) track(k trackKey, now time.Time) *tracked {
	t := r.tracked[k]
	if t == nil {
		t = &tracked{firstSeen: now}
		r.tracked[k] = t
	}
	t.seen = true
	return t
}

// forget drops the executions the last sweep did not list: they ended,
// were replaced, or had an event since.
func (r *Reconciler) forget() {
	for k, t := range r.tracked {
		if !t.seen {
			delete(r.tracked, k)
		}
		t.seen = false
	}
}

func (r *Reconciler) pacer(p substate.Provider) *Pacer {
	pc := r.pacers[p]
	if pc == nil {
		pc = NewPacer(r.QPS, cmp.Or(r.Burst, DefaultBurst(r.QPS, 1)), r.Now, r.Sleep)
		r.pacers[p] = pc
	}
	return pc
}

func (r *Reconciler) warnNoPoller(p substate.Provider) {
	if !r.warned[p] {
		r.warned[p] = true
		r.logger().Debug("the reconciler has no poller for this provider; its stale tenants are not polled", "provider", string(p))
	}
}

// init fills the settings left zero and the internal maps.
func (r *Reconciler) init() {
	r.Interval = cmp.Or(r.Interval, DefaultInterval)
	r.Every = cmp.Or(r.Every, DefaultPollEvery)
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Sleep == nil {
		r.Sleep = timex.Sleep
	}
	if r.tracked == nil {
		r.tracked = map[trackKey]*tracked{}
		r.pacers = map[substate.Provider]*Pacer{}
		r.holds = map[substate.Provider]*hold{}
		r.failures = map[trackKey]*failure{}
		r.failedListed = map[substate.Provider]time.Time{}
		r.failedMark = map[substate.Provider]time.Time{}
		r.failedPacers = map[substate.Provider]*Pacer{}
		r.started = r.Now()
		r.warned = map[substate.Provider]bool{}
		r.lagging = map[substate.Provider]bool{}
	}
}

func (r *Reconciler) logger() *slog.Logger {
	return cmp.Or(r.Logger, slog.New(slog.DiscardHandler))
}
