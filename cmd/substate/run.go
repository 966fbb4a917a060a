package main

import (
	"context"
	"net"
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
