package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// Defaults of a RestatePoller made by NewRestatePoller.
const (
	DefaultRestateInterval   = 15 * time.Second
	DefaultRestateBatchSize  = 100
	DefaultRestateQPS        = 5.0
	DefaultRestateMaxBackoff = 5 * time.Minute
	DefaultRestateTimeout    = 10 * time.Second
)

// RestatePoller polls Restate's admin API for the invocations the view
// tracks. Restate sends no notifications of its own: its status reaches
// substate as a webhook a handler posts, or through this poller, which
// for the non-terminal tenants of provider restate sends
//
//	POST <URL>/query
//	Accept: application/json
//	{"query": "SELECT … FROM sys_invocation WHERE id IN ('inv_…', …)"}
//
// with up to BatchSize invocation ids a query, and publishes each row it
// gets back on SUBSTATE_RAW as a raw event of kind restate.invocation with
// the id "restate-poll-<invocation id>@<modified_at>": an unchanged row is
// deduplicated by JetStream and the normalizer never sees it twice.
//
// Unlike the Step Functions reconciler, it polls every tracked invocation
// every Interval by default (After 0): a batched query is cheap, and
// without it a Restate invocation that backs off, suspends or is killed is
// never heard of. Set After to poll only the invocations nothing was heard
// of for that long, when a webhook reports most changes.
//
// An unreachable admin API or an error answer ({"message": …}) is logged,
// counted, and retried with a delay that doubles after each failed sweep
// up to MaxBackoff; it never stops the poller. An invocation Restate does
// not return (plain service invocations leave sys_invocation when they
// complete) is logged once: its outcome is not known, so nothing is
// published for it.
//
// Set the fields before Run; NewRestatePoller sets the defaults.
type RestatePoller struct {
	// URL is the admin API's base URL, such as http://restate:9070.
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// Client sends the queries; NewRestatePoller sets one with a timeout.
	Client *http.Client
	// View lists the tracked invocations.
	View substate.ActiveLister
	// Publisher puts the rows on SUBSTATE_RAW.
	Publisher substate.RawPublisher
	// Interval is how often a sweep starts while the admin API answers.
	Interval time.Duration
	// After, when positive, limits a sweep to the invocations whose last
	// event is older than After.
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
	Metrics *ReconcileMetrics
	// Logger receives the poller's logs; nil discards them.
	Logger *slog.Logger

	mu       sync.Mutex // one sweep at a time
	pacer    *pacer
	missing  map[string]bool // ids Restate did not return (or invalid), logged once
	failures int             // consecutive failed sweeps
}

// NewRestatePoller returns a poller of the admin API at url with the
// default settings.
func NewRestatePoller(url string, view substate.ActiveLister, pub substate.RawPublisher) *RestatePoller {
	return &RestatePoller{
		URL: url, View: view, Publisher: pub,
		Client:   &http.Client{Timeout: DefaultRestateTimeout},
		Interval: DefaultRestateInterval, BatchSize: DefaultRestateBatchSize, QPS: DefaultRestateQPS,
		MaxBackoff: DefaultRestateMaxBackoff, Columns: DefaultRestateColumns,
		Now: time.Now, Sleep: timex.Sleep,
	}
}

// Run sweeps until ctx is done: every Interval while sweeps succeed, after
// RetryDelay when they fail. It returns nil when ctx is done, and an error
// only for a poller without a URL, view or publisher.
func (p *RestatePoller) Run(ctx context.Context) error {
	if p.URL == "" || p.View == nil || p.Publisher == nil {
		return errors.New("restate poller: no url, view or publisher")
	}
	p.mu.Lock()
	p.init()
	p.mu.Unlock()
	for {
		start := p.Now()
		res, err := p.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := p.Interval - p.Now().Sub(start)
		if err != nil {
			p.failures++
			wait = p.RetryDelay(p.failures)
			p.logger().Error("restate admin poll failed; retrying later", "err", err, "failures", p.failures, "retry_in", wait)
		} else {
			if p.failures > 0 {
				p.logger().Info("restate admin poll works again", "after_failures", p.failures)
			}
			p.failures = 0
			p.logger().Debug("restate admin poll", "tracked", res.Stale, "published", res.Published, "missing", res.Failed)
		}
		if err := p.Sleep(ctx, wait); err != nil && ctx.Err() != nil {
			return nil
		}
	}
}

// RetryDelay is the wait after the given number of consecutive failed
// sweeps: Interval doubled for each failure after the first, capped at
// MaxBackoff.
func (p *RestatePoller) RetryDelay(failures int) time.Duration {
	d, limit := cmp.Or(p.Interval, DefaultRestateInterval), cmp.Or(p.MaxBackoff, DefaultRestateMaxBackoff)
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Sweep queries the tracked invocations once and publishes the rows. It
// returns an error, and stops, at the first query or publish that fails,
// or when the view cannot be listed.
func (p *RestatePoller) Sweep(ctx context.Context) (SweepResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	start := p.Now()
	ids, seen, err := p.tracked(ctx, start)
	res := SweepResult{Stale: len(seen)}
	if err != nil {
		return res, err
	}
	p.Metrics.setStale(substate.ProviderRestate, len(seen))
	for batch := range slices.Chunk(ids, p.BatchSize) {
		if err := p.pollBatch(ctx, batch, &res); err != nil {
			return res, err
		}
	}
	p.forgetMissing(seen)
	p.Metrics.observeSweep("restate", p.Now().Sub(start))
	return res, nil
}

// tracked returns the invocation ids of the non-terminal restate tenants
// (whose last event is older than After, when After is set) that can be
// queried, sorted, and every id listed.
func (p *RestatePoller) tracked(ctx context.Context, now time.Time) (ids []string, seen map[string]bool, err error) {
	seen = map[string]bool{}
	for v, err := range p.View.Active(ctx, now.Add(-max(p.After, 0))) {
		if err != nil {
			return nil, seen, fmt.Errorf("restate poller: list tracked invocations: %w", err)
		}
		id := v.WorkflowExecutionID
		if v.Provider != substate.ProviderRestate || id == "" || seen[id] {
			continue
		}
		seen[id] = true
		if !validInvocationID(id) {
			p.reportMissing(id, "the invocation id is not one Restate issues; not polling it", v.TenantID)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, seen, nil
}

// pollBatch queries one batch of ids and publishes the rows.
func (p *RestatePoller) pollBatch(ctx context.Context, ids []string, res *SweepResult) error {
	if err := p.pacer.wait(ctx, 1); err != nil {
		return err
	}
	res.Polled += len(ids)
	rows, err := p.query(ctx, ids)
	if err != nil {
		res.Failed += len(ids)
		p.Metrics.countPolls(substate.ProviderRestate, substate.ErrorCode(err), len(ids))
		return err
	}
	found := make(map[string]bool, len(rows))
	for _, row := range rows {
		raw, id, err := restateRaw(row)
		if err != nil {
			p.logger().Warn("restate admin query returned a row without an id; skipped", "err", err)
			continue
		}
		found[id] = true
		if err := p.Publisher.PublishRaw(ctx, raw); err != nil {
			p.Metrics.countPolls(substate.ProviderRestate, OutcomePublishFailed, 1)
			return fmt.Errorf("restate poller: publish the row of %s: %w", id, err)
		}
		delete(p.missing, id)
		res.Published++
		p.Metrics.countPolls(substate.ProviderRestate, OutcomeOK, 1)
	}
	for _, id := range ids {
		if !found[id] {
			res.Failed++
			p.Metrics.countPolls(substate.ProviderRestate, substate.ENOTFOUND, 1)
			p.reportMissing(id, "restate has no sys_invocation row for this invocation (a completed service invocation is not kept); its outcome is unknown", "")
		}
	}
	return nil
}

// reportMissing logs an invocation the poller cannot report on, once.
func (p *RestatePoller) reportMissing(id, why, tenant string) {
	if p.missing[id] {
		return
	}
	p.missing[id] = true
	args := []any{"invocation", id}
	if tenant != "" {
		args = append(args, "tenant", tenant)
	}
	p.logger().Warn(why, args...)
}

// forgetMissing drops the logged-once marks of invocations no longer tracked.
func (p *RestatePoller) forgetMissing(tracked map[string]bool) {
	for id := range p.missing {
		if !tracked[id] {
			delete(p.missing, id)
		}
	}
}

// init fills the settings left zero and the internal state.
func (p *RestatePoller) init() {
	p.Interval = cmp.Or(p.Interval, DefaultRestateInterval)
	p.BatchSize = cmp.Or(max(p.BatchSize, 0), DefaultRestateBatchSize)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, DefaultRestateMaxBackoff)
	if len(p.Columns) == 0 {
		p.Columns = DefaultRestateColumns
	}
	if p.Client == nil {
		p.Client = &http.Client{Timeout: DefaultRestateTimeout}
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = timex.Sleep
	}
	if p.pacer == nil {
		p.pacer = newPacer(p.QPS, defaultBurst(p.QPS, 1), p.Now, p.Sleep)
		p.missing = map[string]bool{}
	}
}

func (p *RestatePoller) logger() *slog.Logger {
	return cmp.Or(p.Logger, slog.New(slog.DiscardHandler))
}
