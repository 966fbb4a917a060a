package main

import (
	"context"
	"errors"
	"time"

	"github.com/substatehq/substate/tools/soak"
)

// SoakCmd is "substate soak": kill -9 under load, again and again, then
// check that nothing acknowledged was lost.
type SoakCmd struct {
	Cycles   int           `default:"200" help:"How many times the worker is killed with SIGKILL under load and started again."`
	Tenants  int           `default:"200" help:"Tenants the load spreads over; each tenant's events are posted in order, one after the other is acknowledged."`
	Clients  int           `default:"16" help:"Concurrent HTTP clients posting events, as providers retrying on any answer but 202."`
	MinUp    time.Duration `default:"300ms" help:"Shortest time the worker runs under load before it is killed."`
	MaxUp    time.Duration `default:"2s" help:"Longest time the worker runs under load before it is killed."`
	DataDir  string        `help:"Data directory of the worker (default: a new temporary one, removed afterwards)." type:"path"`
	Seed     uint64        `default:"1" help:"Seed of the kill times."`
	JSON     bool          `help:"Print the figures as JSON."`
	NATSSync string        `name:"nats-sync" enum:"default,always" default:"default" help:"The worker's --nats-sync."`
}

// Run soaks the worker and prints the figures; a lost event or a view
// that differs from the stream is exit status 1.
func (c *SoakCmd) Run(ctx context.Context, m *Main) error {
	err := soak.Run(ctx, soak.Config{
		Cycles: c.Cycles, Tenants: c.Tenants, Clients: c.Clients, MinUp: c.MinUp, MaxUp: c.MaxUp,
		DataDir: c.DataDir, Seed: c.Seed, JSON: c.JSON, NATSSync: c.NATSSync,
	}, m.Stdout, m.Stderr)
	if errors.Is(err, soak.ErrLost) {
		return exitError{1}
	}
	return err
}
