// Package timex holds the time helpers the adapters share: a sleep that a
// context can cut short, and exponential backoff with jitter.
package timex

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx is done, and returns ctx's error then.
// A d of zero or less returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
