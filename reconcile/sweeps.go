package reconcile

import (
	"context"
	"time"
)

// Sweeps repeats a sweep until its context is done: the loop the
// Reconciler and the Restate admin-API poller share. After each sweep,
// Next takes what it returned and how long it took, logs it, and says how
// long to wait before the next one.
type Sweeps struct {
	// Now is the clock sweeps are timed with.
	Now func() time.Time
	// Sleep waits for a duration or until ctx is done.
	Sleep func(ctx context.Context, d time.Duration) error
	// Sweep does one sweep.
	Sweep func(ctx context.Context) (SweepResult, error)
	// Next handles the outcome of a sweep that took took and returns the
	// wait before the next; it is not called once ctx is done.
	Next func(res SweepResult, err error, took time.Duration) time.Duration
}

// Run sweeps until ctx is done, then returns nil.
func (s Sweeps) Run(ctx context.Context) error {
	for {
		start := s.Now()
		res, err := s.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := s.Next(res, err, s.Now().Sub(start))
		if err := s.Sleep(ctx, wait); err != nil && ctx.Err() != nil {
			return nil
		}
	}
}
