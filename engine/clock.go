package engine

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and sleeps until a deadline. Every delay of the
// engine (retry backoffs, Wait states) goes through it, so tests can move
// time instead of sleeping. Task timeouts use real time: they bound a
// network round trip, not workflow time.
type Clock interface {
	Now() time.Time
	// SleepUntil returns nil once deadline has passed (at once when it
	// already has) or ctx's error when ctx is done first.
	SleepUntil(ctx context.Context, deadline time.Time) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps on a timer until deadline or until ctx is done.
func (SystemClock) SleepUntil(ctx context.Context, deadline time.Time) error {
	d := time.Until(deadline)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ManualClock is a Clock that moves only when Advance or Set is called. It
// is meant for tests of code that waits.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	sleeper []sleeper
}

type sleeper struct {
	deadline time.Time
	wake     chan struct{}
}

// NewManualClock returns a ManualClock that reads now.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and wakes the sleepers whose
// deadline has passed.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t and wakes the sleepers whose deadline has passed.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.sleeper[:0]
	for _, s := range c.sleeper {
		if s.deadline.After(t) {
			kept = append(kept, s)
			continue
		}
		close(s.wake)
	}
	c.sleeper = kept
}

// Sleepers returns how many goroutines are sleeping on the clock.
func (c *ManualClock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleeper)
}

// SleepUntil blocks until the clock reaches deadline or ctx is done.
func (c *ManualClock) SleepUntil(ctx context.Context, deadline time.Time) error {
	c.mu.Lock()
	if !deadline.After(c.now) {
		c.mu.Unlock()
		return ctx.Err()
	}
	s := sleeper{deadline: deadline, wake: make(chan struct{})}
	c.sleeper = append(c.sleeper, s)
	c.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		c.forget(s.wake)
		return ctx.Err()
	}
}

func (c *ManualClock) forget(wake chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.sleeper {
		if s.wake == wake {
			c.sleeper = append(c.sleeper[:i], c.sleeper[i+1:]...)
			return
		}
	}
}
