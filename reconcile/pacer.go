package reconcile

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"
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

// DefaultBurst is the burst of a rate: one second's worth, at least n.
func DefaultBurst(qps float64, n int) int {
	if qps <= 0 || math.IsInf(qps, 1) {
		return max(n, 1)
	}
	return max(int(math.Ceil(qps)), n, 1)
}
