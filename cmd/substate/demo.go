package main

import (
	"context"
	"time"

	"github.com/substatehq/substate/tools/demorun"
	"github.com/substatehq/substate/worker"
)

// DemoCmd is "substate demo": the worker on the embedded default, driven by
// real traffic until every tenant has settled.
type DemoCmd struct {
	Tenants      int           `default:"8" help:"Tenants running the order workflow on the built-in engine."`
	Timeout      time.Duration `default:"3m" help:"Give up when the tenants have not settled by then."`
	Stay         bool          `help:"Keep the worker and its console running after the summary, until interrupted."`
	worker.Flags `embed:""`
}

// Run runs the demo and fails when a tenant settles other than expected.
func (c *DemoCmd) Run(ctx context.Context, m *Main) error {
	return demorun.Run(ctx, demorun.Config{Tenants: c.Tenants, Timeout: c.Timeout, Stay: c.Stay,
		Flags: c.Flags, Out: m.Stdout, Ready: m.Ready})
}
