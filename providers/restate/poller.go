package restate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/reconcile"
)

// Defaults of a Poller made by NewPoller.
const (
	DefaultInterval   = 15 * time.Second
	DefaultBatchSize  = 100
	DefaultQPS        = 5.0
	DefaultMaxBackoff = 5 * time.Minute
	DefaultLookback   = time.Hour
	DefaultPageSize   = 500
)

// Poller polls Restate's admin API. Restate sends no notifications
// of its own: its status reaches substate as a webhook a handler posts, or
// through this poller, which every Interval
//
//   - discovers, for the Services it is given, the invocations that are new
//     or changed since the last sweep (by modified_at; on its first sweep,
//     those changed in the last Lookback and every one not completed);
//   - reads again, by id, the invocations of the non-terminal restate
//     tenants of the view, because Restate does not move modified_at while
//     an invocation retries: a retry, its failure and its backing-off show
//     only in the row itself;
//   - reads the failure events in sys_journal_events of a paused
//     invocation, whose row says nothing of its failures, and the retry
//     policy of its handler (GET /services/{service}), and attaches them
//     to the row; and to the rows of an invocation resumed after a pause,
//     whose retry_count starts again at 1;
//
// with POST /query on its Admin client (SQL on sys_invocation),
// and publishes every row on SUBSTATE_RAW as a raw event of kind
// restate.invocation (see restateRaw for its id). A row unchanged since the
// poller last published it is not sent again: an invocation that stays
// paused or suspended for days costs no publish, and no copy each time
// JetStream's duplicate window has passed; after a restart it is sent once
// more, and deduplicated within the window.
//
// An id that is not a Restate invocation id is never put into a query (one
// such id fails the whole query): its tenant gets a dead letter with the
// reason, once. A batch the admin API refuses is split until the ids it
// refuses stand alone, and those are dead-lettered the same way, so one bad
// id never holds up the other tenants. An unreachable admin API, or one
// that refuses every query, is logged, counted, and retried with a delay
// that doubles after each failed sweep up to MaxBackoff; it never stops the
// poller. An invocation Restate no longer returns (a completed invocation
// leaves sys_invocation after its completion_retention, 24 h by default on
// 1.7, at once when the retention is 0) is logged once: its outcome is not
// known, so nothing is published for it.
//
// Set the fields before Run; NewPoller sets the defaults.
type Poller struct {
	// Admin is the admin API client the queries go through.
	Admin *Client
	// View lists the tracked invocations.
	View substate.ActiveLister
	// Publisher puts the rows on SUBSTATE_RAW.
	Publisher substate.RawPublisher
	// DeadLetters receives the tenants whose invocation id cannot be
	// polled; nil only logs them.
	DeadLetters substate.DeadLetterPublisher
	// Services are the Restate services whose invocations are discovered;
	// empty: only the view's invocations are polled.
	Services []string
	// Lookback is how far back the first discovery reads completed rows.
	Lookback time.Duration
	// PageSize is how many rows one discovery query reads.
	PageSize int
	// Interval is how often a sweep starts while the admin API answers.
	Interval time.Duration
	// After, when positive, limits the polls by id to the invocations whose
	// last event is older than After.
	After time.Duration
	// BatchSize is how many invocation ids one query asks about.
	BatchSize int
	// QPS is how many queries a second the poller sends; 0 or less means
	// no limit.
	QPS float64
	// MaxBackoff caps the delay between failed sweeps.
	MaxBackoff time.Duration
	// Columns are the sys_invocation columns selected.
	Columns []string
	// Now is the clock.
	Now func() time.Time
	// Sleep waits for a duration or until ctx is done.
	Sleep func(ctx context.Context, d time.Duration) error
	// Metrics receives poll outcomes and query counts; nil disables them.
	Metrics *reconcile.Metrics
	// Logger receives the poller's logs; nil discards them.
	Logger *slog.Logger

	mu         sync.Mutex // one sweep at a time
	pacer      *reconcile.Pacer
	missing    map[string]bool // ids Restate did not return (or refused), logged once
	failures   int             // consecutive failed sweeps
	cursor     *discoveryCursor
	discovered time.Time                  // when the last discovery started
	journals   map[string]journalEntry    // attached journal events, by invocation id
	inputs     map[string]json.RawMessage // inputs of keyless invocations (nil: none), by invocation id
	policies   map[string]policyEntry     // retry policies, by service
	sent       map[string]string          // the raw event id last published, by invocation id
	refusals   map[string]refusal         // ids the admin API refused alone, by invocation id
}

// refusal is an invocation id the admin API refused to query while it
// answered for others: it is asked about again only after a delay that
// doubles with each refusal.
type refusal struct {
	count int
	until time.Time
}

// maxRefusals bounds the refused ids the poller remembers; past it, a
// refused id is asked about every sweep again.
const maxRefusals = 10000

// refusedFor is how long an id refused count times is not asked about:
// Interval, doubled for each refusal after the first, capped at an hour.
func (p *Poller) refusedFor(count int) time.Duration {
	d := p.Interval
	for i := 1; i < count && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// NewPoller returns a poller of the admin API through admin with the
// default settings.
func NewPoller(admin *Client, view substate.ActiveLister, pub substate.RawPublisher) *Poller {
	return &Poller{
		Admin: admin, View: view, Publisher: pub,
		Interval: DefaultInterval, BatchSize: DefaultBatchSize, QPS: DefaultQPS,
		MaxBackoff: DefaultMaxBackoff, Columns: DefaultColumns,
		Lookback: DefaultLookback, PageSize: DefaultPageSize,
		Now: time.Now, Sleep: timex.Sleep,
	}
}

// Run sweeps until ctx is done: every Interval while sweeps succeed, after
// RetryDelay when they fail. It returns nil when ctx is done, and an error
// only for a poller without an admin URL, view or publisher.
func (p *Poller) Run(ctx context.Context) error {
	if p.Admin == nil || p.Admin.URL == "" || p.View == nil || p.Publisher == nil {
		return errors.New("restate poller: no admin url, view or publisher")
	}
	p.mu.Lock()
	p.init()
	p.mu.Unlock()
	return reconcile.Sweeps{Now: p.Now, Sleep: p.Sleep, Sweep: p.Sweep, Next: p.next}.Run(ctx)
}

// next logs a sweep and returns the wait before the next one: what is
// left of Interval, or RetryDelay after a failed sweep.
func (p *Poller) next(res reconcile.SweepResult, err error, took time.Duration) time.Duration {
	if err != nil {
		p.failures++
		wait := p.RetryDelay(p.failures)
		p.logger().Error("restate admin poll failed; retrying later", "err", err, "failures", p.failures, "retry_in", wait)
		return wait
	}
	if p.failures > 0 {
		p.logger().Info("restate admin poll works again", "after_failures", p.failures)
	}
	p.failures = 0
	p.logger().Debug("restate admin poll", "tracked", res.Stale, "published", res.Published, "missing", res.Failed)
	return p.Interval - took
}

// RetryDelay is the wait after the given number of consecutive failed
// sweeps: Interval doubled for each failure after the first, capped at
// MaxBackoff.
func (p *Poller) RetryDelay(failures int) time.Duration {
	d, limit := cmp.Or(p.Interval, DefaultInterval), cmp.Or(p.MaxBackoff, DefaultMaxBackoff)
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// restateSweep is the state of one sweep.
type restateSweep struct {
	res       reconcile.SweepResult
	published map[string]bool // invocations whose row this sweep published
	answered  bool            // a query of this sweep succeeded
	refused   map[string]error
}

// Sweep discovers the Services' new and changed invocations, queries the
// tracked ones, and publishes the rows. It returns an error, and stops,
// when the admin API is unreachable or refuses every query, when a publish
// fails, or when the view cannot be listed.
func (p *Poller) Sweep(ctx context.Context) (reconcile.SweepResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Admin == nil {
		return reconcile.SweepResult{}, errors.New("restate poller: no admin api client")
	}
	p.init()
	start := p.Now()
	s := &restateSweep{published: map[string]bool{}, refused: map[string]error{}}
	if err := p.discover(ctx, s, start); err != nil {
		return s.res, err
	}
	ids, seen, err := p.tracked(ctx, s, start)
	if err != nil {
		return s.res, err
	}
	p.Metrics.SetStale(substate.ProviderRestate, s.res.Stale)
	ids = slices.DeleteFunc(ids, func(id string) bool { return s.published[id] })
	for batch := range slices.Chunk(ids, p.BatchSize) {
		if err := p.pollIDs(ctx, s, batch); err != nil {
			return s.res, err
		}
	}
	if err := p.settleRefused(ctx, s, seen); err != nil {
		return s.res, err
	}
	p.forget(seen, s.published)
	p.Metrics.ObserveSweep("restate", p.Now().Sub(start))
	return s.res, nil
}

// tracked returns the invocation ids of the non-terminal restate tenants
// (whose last event is older than After, when After is set) that can be
// queried, sorted, and every non-terminal restate invocation listed with
// its tenant, however recent its last event: what the poller remembers of
// an invocation (a pause, a refusal) is kept while the view lists it. An
// id Restate cannot parse is dead-lettered instead.
func (p *Poller) tracked(ctx context.Context, s *restateSweep, now time.Time) (ids []string, seen map[string]string, err error) {
	seen = map[string]string{}
	quiet := now.Add(-max(p.After, 0))
	for v, err := range p.View.Active(ctx, now) {
		if err != nil {
			return nil, seen, fmt.Errorf("restate poller: list tracked invocations: %w", err)
		}
		id := v.WorkflowExecutionID
		if v.Provider != substate.ProviderRestate || id == "" {
			continue
		}
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = v.TenantID
		if !v.LastEventAt.Before(quiet) {
			continue
		}
		if r, ok := p.refusals[id]; ok && now.Before(r.until) {
			continue // refused alone before: asked again after its delay
		}
		s.res.Stale++
		if !validInvocationID(id) {
			reason := fmt.Sprintf("the execution id %q is not a Restate invocation id (inv_1 and 33 base62 characters); the restate poller does not query it", id)
			if err := p.giveUp(ctx, id, v.TenantID, substate.EINVALID, reason); err != nil {
				return nil, seen, err
			}
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, seen, nil
}

// init fills the settings left zero and the internal state.
func (p *Poller) init() {
	p.Interval = cmp.Or(p.Interval, DefaultInterval)
	p.BatchSize = cmp.Or(max(p.BatchSize, 0), DefaultBatchSize)
	p.PageSize = cmp.Or(max(p.PageSize, 0), DefaultPageSize)
	p.Lookback = cmp.Or(p.Lookback, DefaultLookback)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, DefaultMaxBackoff)
	if len(p.Columns) == 0 {
		p.Columns = DefaultColumns
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = timex.Sleep
	}
	if p.pacer == nil {
		p.pacer = reconcile.NewPacer(p.QPS, reconcile.DefaultBurst(p.QPS, 1), p.Now, p.Sleep)
		p.missing = map[string]bool{}
		p.journals = map[string]journalEntry{}
		p.inputs = map[string]json.RawMessage{}
		p.policies = map[string]policyEntry{}
		p.sent = map[string]string{}
		p.refusals = map[string]refusal{}
	}
}

func (p *Poller) logger() *slog.Logger {
	return cmp.Or(p.Logger, slog.New(slog.DiscardHandler))
}
