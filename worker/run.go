package worker

import (
	"context"
	"errors"
	"sync"
)

// RunGroup runs every actor until the first one returns, then cancels the
// others and waits for them; it returns the error of the first one to
// return. An actor returns only when ctx is done or it failed: one that
// returns nil while the group still runs stopped on its own, which is a
// failure too (ErrStopped), so that a worker never exits 0 having lost a
// part of itself.
func RunGroup(ctx context.Context, actors ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, a := range actors {
		wg.Go(func() {
			err := a(ctx)
			if err == nil && ctx.Err() == nil {
				err = ErrStopped
			}
			once.Do(func() { first = err })
			cancel()
		})
	}
	wg.Wait()
	return first
}

// ErrStopped is the failure of a worker actor that returned while it
// should still run.
var ErrStopped = errors.New("a worker component stopped on its own")
