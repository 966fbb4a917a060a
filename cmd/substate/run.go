package main

import (
	"context"
	"errors"

	"github.com/substatehq/substate/worker"
)

// RunCmd is "substate run": the worker.
type RunCmd struct {
	worker.Flags `embed:""`
}

// Run starts the worker and runs it until a signal arrives.
func (c *RunCmd) Run(ctx context.Context, m *Main) (err error) {
	w := worker.New(c.Flags)
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	if m.Ready != nil {
		m.Ready(w)
	}
	w.Logger.Info("substate running", "http", w.HTTP.URL(), "nats", w.Bus.ClientURL())
	err = w.Run(ctx)
	w.Logger.Info("substate stopped")
	return err
}
