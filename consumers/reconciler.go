package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// Defaults of a Reconciler made by NewReconciler.
const (
	DefaultReconcileAfter    = 2 * time.Minute
	DefaultReconcileInterval = 15 * time.Second
	DefaultHistoryInterval   = 4 * time.Minute
	DefaultReconcileQPS      = 10.0
	DefaultHistoryCost       = 2
)

// Reconciler is the safety net under the provider events. Events can be
// lost, arrive a day late, or never be sent (a Step Functions execution
// backing off between retries sends none), so the reconciler asks a
// provider for the current status of the non-terminal tenants nothing was
// heard of for a while and publishes the answer on SUBSTATE_RAW, where the
// normalizer and the projector treat it like any event. It never writes
// the view: the projection's order rules decide whether a poll result is
// newer than what the view holds, so a late poll cannot regress it.
//
// Each sweep lists the tenants whose last event is older than After. Of
// those it polls an execution only when its last poll is at least After
// old too, so a quiet execution costs one poll per After, not one per
// sweep. A poll asks for history (withHistory) when the execution's last
// history read is at least HistoryInterval old. Calls are paced per
// provider to QPS a second, a poll with history counting HistoryCost.
//
// Failures never stop it. An execution the provider does not know
// (ENOTFOUND) or whose id it rejects (EINVALID) is logged once and not
// polled again while the view keeps it. A throttled, unavailable or
// unauthorized provider is logged and its remaining tenants wait for the
// next sweep. Other errors are logged and retried at the next sweep.
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
	// After is how long nothing may be heard of a tenant (no event and no
	// poll) before its provider is asked.
	After time.Duration
	// Interval is how often a sweep starts.
	Interval time.Duration
	// HistoryInterval is how often an execution's poll includes history.
	HistoryInterval time.Duration
	// QPS is how many provider calls a second each provider gets; 0 or
	// less means no limit.
	QPS float64
	// Burst is how many calls may go at once after a quiet spell; 0 means
	// one second's worth (and at least HistoryCost).
	Burst int
	// HistoryCost is how many calls a poll with history takes from the
	// rate limit: the status call and the history pages it may read.
	HistoryCost int
	// Now is the clock sweeps are timed with.
	Now func() time.Time
	// Sleep waits for a duration or until ctx is done; the pacing and the
	// sweep interval use it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Metrics receives poll outcomes; nil disables them.
	Metrics *ReconcileMetrics
	// Logger receives the reconciler's logs; nil discards them.
	Logger *slog.Logger

	mu      sync.Mutex // one sweep at a time
	tracked map[trackKey]*tracked
	pacers  map[substate.Provider]*pacer
	warned  map[substate.Provider]bool // providers without a poller, logged once
}

// NewReconciler returns a reconciler with the default settings.
func NewReconciler(view substate.ActiveLister, pollers map[substate.Provider]substate.StatusPoller, pub substate.RawPublisher) *Reconciler {
	return &Reconciler{
		View: view, Pollers: pollers, Publisher: pub,
		After: DefaultReconcileAfter, Interval: DefaultReconcileInterval, HistoryInterval: DefaultHistoryInterval,
		QPS: DefaultReconcileQPS, HistoryCost: DefaultHistoryCost,
		Now: time.Now, Sleep: timex.Sleep,
	}
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Stale     int // non-terminal tenants listed as stale
	Polled    int // executions asked about
	Published int // poll results published on SUBSTATE_RAW
	Failed    int // executions whose poll failed
	NotDue    int // stale executions polled less than After ago
	Deferred  int // due executions left for the next sweep: their provider refused
	Unpolled  int // stale tenants no poller asks about (no poller, or given up)
}

// trackKey names one execution of one provider.
type trackKey struct {
	provider  substate.Provider
	execution string
}

// tracked is what the reconciler remembers of one execution between
// sweeps. It is forgotten once a sweep no longer lists the execution.
type tracked struct {
	lastPoll    time.Time // start of the sweep of the last published poll
	lastHistory time.Time // the same, for the last poll with history
	gaveUp      string    // the code of a permanent failure: no more polls
	seen        bool      // listed by the current sweep
}

// sweep is the state of one sweep.
type sweep struct {
	start time.Time
	held  map[substate.Provider]bool // providers that refused a poll
	stale map[substate.Provider]int
	res   SweepResult
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
	for {
		start := r.Now()
		res, err := r.Sweep(ctx)
		took := r.Now().Sub(start)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.logger().Error("reconcile sweep failed; the next sweep retries", "err", err)
		case took > r.After:
			r.logger().Warn("reconcile sweep took longer than reconcile-after: raise the rate limit or the threshold",
				"took", took, "after", r.After, "polled", res.Polled, "stale", res.Stale)
		}
		r.logger().Debug("reconcile sweep", "stale", res.Stale, "polled", res.Polled, "published", res.Published,
			"failed", res.Failed, "deferred", res.Deferred, "took", took)
		if err := r.Sleep(ctx, r.Interval-took); err != nil && ctx.Err() != nil {
			return nil
		}
	}
}

// Sweep polls the stale executions that are due once, and returns what it
// did. It returns an error when the view cannot be listed, a result cannot
// be published, or ctx is done; poll failures are handled as the type
// documentation says and do not end the sweep.
func (r *Reconciler) Sweep(ctx context.Context) (SweepResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	s := sweep{start: r.Now(), held: map[substate.Provider]bool{}, stale: map[substate.Provider]int{}}
	for v, err := range r.View.Active(ctx, s.start.Add(-r.After)) {
		if err != nil {
			return s.res, fmt.Errorf("reconcile: list stale tenants: %w", err)
		}
		if err := r.visit(ctx, &s, &v); err != nil {
			return s.res, err
		}
	}
	r.forget()
	for p := range r.Pollers {
		r.Metrics.setStale(p, s.stale[p])
	}
	r.Metrics.observeSweep("reconciler", r.Now().Sub(s.start))
	return s.res, nil
}

// visit decides what to do with one stale tenant and polls it when due.
func (r *Reconciler) visit(ctx context.Context, s *sweep, v *substate.TenantView) error {
	s.res.Stale++
	s.stale[v.Provider]++
	poller := r.Pollers[v.Provider]
	if poller == nil || v.WorkflowExecutionID == "" {
		s.res.Unpolled++
		r.warnNoPoller(v.Provider)
		return nil
	}
	t := r.track(trackKey{v.Provider, v.WorkflowExecutionID})
	switch {
	case t.gaveUp != "":
		s.res.Unpolled++
		return nil
	case !due(t.lastPoll, s.start, r.After):
		s.res.NotDue++
		return nil
	case s.held[v.Provider]:
		s.res.Deferred++
		return nil
	}
	return r.poll(ctx, s, v, poller, t)
}

// poll asks the provider about one execution and publishes the answer.
func (r *Reconciler) poll(ctx context.Context, s *sweep, v *substate.TenantView, poller substate.StatusPoller, t *tracked) error {
	history := due(t.lastHistory, s.start, r.HistoryInterval)
	cost := 1
	if history {
		cost = r.HistoryCost
	}
	if err := r.pacer(v.Provider).wait(ctx, cost); err != nil {
		return err
	}
	s.res.Polled++
	raw, err := poller.Poll(ctx, v.WorkflowExecutionID, history)
	if err != nil {
		return r.pollFailed(ctx, s, v, t, err)
	}
	if err := r.Publisher.PublishRaw(ctx, raw); err != nil {
		r.Metrics.countPolls(v.Provider, OutcomePublishFailed, 1)
		return fmt.Errorf("reconcile: publish the poll of %s: %w", v.WorkflowExecutionID, err)
	}
	r.Metrics.countPolls(v.Provider, OutcomeOK, 1)
	s.res.Published++
	t.lastPoll = s.start
	if history {
		t.lastHistory = s.start
	}
	return nil
}

// pollFailed counts and logs a failed poll and decides what follows.
func (r *Reconciler) pollFailed(ctx context.Context, s *sweep, v *substate.TenantView, t *tracked, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	code := substate.ErrorCode(err)
	r.Metrics.countPolls(v.Provider, code, 1)
	s.res.Failed++
	log := r.logger().With("provider", string(v.Provider), "tenant", v.TenantID, "execution", v.WorkflowExecutionID, "code", code, "err", err)
	switch code {
	case substate.ENOTFOUND, substate.EINVALID:
		t.gaveUp = code
		log.Warn("the provider cannot tell this execution's status; not polling it again while the view keeps it")
	case substate.ETHROTTLED, substate.EUNAVAILABLE, substate.EUNAUTHORIZED:
		s.held[v.Provider] = true
		log.Warn("the provider refused a poll; its other tenants wait for the next sweep")
	default:
		log.Error("poll failed; the next sweep retries")
	}
	return nil
}

// due reports whether something last done at last (zero: never) is due
// again at now, every period.
func due(last, now time.Time, every time.Duration) bool {
	return last.IsZero() || !last.After(now.Add(-every))
}

// track returns the memory of an execution, marked as seen by this sweep.
func (r *Reconciler) track(k trackKey) *tracked {
	t := r.tracked[k]
	if t == nil {
		t = &tracked{}
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

func (r *Reconciler) pacer(p substate.Provider) *pacer {
	pc := r.pacers[p]
	if pc == nil {
		cost := max(r.HistoryCost, 1)
		pc = newPacer(r.QPS, cmp.Or(r.Burst, defaultBurst(r.QPS, cost)), r.Now, r.Sleep)
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
	r.After = cmp.Or(r.After, DefaultReconcileAfter)
	r.Interval = cmp.Or(r.Interval, DefaultReconcileInterval)
	r.HistoryInterval = cmp.Or(r.HistoryInterval, DefaultHistoryInterval)
	r.HistoryCost = cmp.Or(r.HistoryCost, DefaultHistoryCost)
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Sleep == nil {
		r.Sleep = timex.Sleep
	}
	if r.tracked == nil {
		r.tracked = map[trackKey]*tracked{}
		r.pacers = map[substate.Provider]*pacer{}
		r.warned = map[substate.Provider]bool{}
	}
}

func (r *Reconciler) logger() *slog.Logger {
	return cmp.Or(r.Logger, slog.New(slog.DiscardHandler))
}
