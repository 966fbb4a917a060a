package main

import (
	"context"
	"errors"
	"net"
	"sync"
)

// RunCmd is "substate run": the worker.
type RunCmd struct {
	WorkerFlags `embed:""`
}

// Run starts the worker and runs it until a signal arrives.
func (c *RunCmd) Run(ctx context.Context, m *Main) error {
	w := NewWorker(c.WorkerFlags)
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer w.Close()
	if m.Ready != nil {
		m.Ready(w)
	}
	w.Logger.Info("substate running", "http", w.HTTP.URL(), "nats", w.Bus.ClientURL())
	err := w.Run(ctx)
	w.Logger.Info("substate stopped")
	return err
}

// loopback reports whether a listen address only accepts local connections.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runGroup runs every actor until the first one returns, then cancels the
// others and waits for them; it returns the error of the first one to
// return. An actor returns only when ctx is done or it failed: one that
// returns nil while the group still runs stopped on its own, which is a
// failure too (errStopped), so that a worker never exits 0 having lost a
// part of itself.
func runGroup(ctx context.Context, actors ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, a := range actors {
		wg.Go(func() {
			err := a(ctx)
			if err == nil && ctx.Err() == nil {
				err = errStopped
			}
			once.Do(func() { first = err })
			cancel()
		})
	}
	wg.Wait()
	return first
}

// errStopped is the failure of a worker actor that returned while it
// should still run.
var errStopped = errors.New("a worker component stopped on its own")
