package reconcile

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// Pacer spaces the calls to one provider with a token bucket that reads
// an injected clock and sleeps with an injected function, so the pacing
// can be checked without waiting.
type Pacer struct {
	lim   *rate.Limiter
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// NewPacer returns a pacer of qps tokens per second (no limit when qps is
// not positive) holding at most burst tokens (at least one).
func NewPacer(qps float64, burst int, now func() time.Time, sleep func(context.Context, time.Duration) error) *Pacer {
	limit := rate.Inf
	if qps > 0 {
		limit = rate.Limit(qps)
	}
	return &Pacer{lim: rate.NewLimiter(limit, max(burst, 1)), now: now, sleep: sleep}
}

// Wait takes n tokens (at most the burst), sleeping until they are there.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	n = max(min(n, p.lim.Burst()), 1)
	now := p.now()
	r := p.lim.ReserveN(now, n)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if err := p.sleep(ctx, d); err != nil {
		r.CancelAt(p.now())
		return err
	}
	return nil
}

// Allow takes a token if one is there now, without waiting, and reports
// whether it did.
func (p *Pacer) Allow() bool { return p.lim.AllowN(p.now(), 1) }

// DefaultBurst is the burst of a rate: one second's worth, at least n.
func DefaultBurst(qps float64, n int) int {
	if qps <= 0 || math.IsInf(qps, 1) {
		return max(n, 1)
	}
	return max(int(math.Ceil(qps)), n, 1)
}

// hold is a provider that refused polls: none is sent before until.
type hold struct {
	until   time.Time
	refused int // refusals in a row
}

// holdProvider holds a provider that refused a poll with err: for the wait
// err asks for, else for a backoff with jitter that grows with each
// refusal in a row, up to Every. It returns the wait.
func (r *Reconciler) holdProvider(p substate.Provider, err error) time.Duration {
	h := r.holds[p]
	if h == nil {
		h = &hold{}
		r.holds[p] = h
	}
	h.refused++
	wait := substate.RetryAfter(err)
	if wait <= 0 {
		wait = timex.Backoff{Base: time.Second, Max: r.Every, Rand: r.Rand}.Delay(h.refused)
	}
	h.until = r.Now().Add(wait)
	return wait
}

// held reports whether a provider is held now.
func (r *Reconciler) held(p substate.Provider) bool {
	h := r.holds[p]
	return h != nil && r.Now().Before(h.until)
}
