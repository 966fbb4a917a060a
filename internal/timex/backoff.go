package timex

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with jitter: the wait after the n-th
// failure in a row is Base × 2^(n-1), capped by Max, spread at random over
// its upper half, so callers that failed together do not come back
// together and none waits less than half the nominal delay.
type Backoff struct {
	// Base is the nominal wait after the first failure.
	Base time.Duration
	// Max caps the nominal wait.
	Max time.Duration
	// Rand returns a number in [0,1) that spreads the waits; nil is
	// math/rand/v2's Float64.
	Rand func() float64
}

// Delay returns the wait after the n-th failure in a row (n ≥ 1): a
// duration in [d/2, d), d = min(Base × 2^(n-1), Max).
func (b Backoff) Delay(n int) time.Duration {
	d := float64(b.Base) * math.Pow(2, float64(max(n-1, 0)))
	if b.Max > 0 {
		d = math.Min(d, float64(b.Max))
	}
	j := rand.Float64
	if b.Rand != nil {
		j = b.Rand
	}
	return time.Duration(d/2 + d/2*j())
}
