package main

import (
	"context"
	"errors"
	"time"

	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// BenchCmd is "substate bench": the real pipeline in process, measured.
type BenchCmd struct {
	Events     int           `default:"100000" help:"Events per scenario."`
	Tenants    int           `default:"100000" help:"Tenants of the large-view scenario (up to 1,000,000)."`
	Rate       float64       `default:"10000" help:"Offered rate of the latency scenario, in events per second."`
	Duration   time.Duration `default:"5s" help:"How long the latency scenario and the naive baseline send."`
	JSON       bool          `help:"Print the report as JSON."`
	Keep       bool          `help:"Keep each scenario's data directory under <data-dir>/bench."`
	Profile    string        `type:"path" placeholder:"FILE" help:"Write a CPU profile of the whole run to FILE (go tool pprof reads it)."`
	MemProfile string        `type:"path" placeholder:"FILE" help:"Write a heap profile to FILE at the end of the large-view scenario, its pipeline still open, of the flat-cost scenario, or of the incident's first phase."`

	FlatFlags    `embed:""`
	Incident     time.Duration `help:"Run only the incident scenario: a view of --tenants tenants, then --incident-rate status changes a second (5,000) over the HTTP ingress for this long with no console open, as long again with a console page following the changes, and as long again with none (60s for the documented figure); 0 runs the other scenarios." placeholder:"DURATION"`
	IncidentRate float64       `default:"5000" help:"Offered rate of the incident scenario, in status changes per second." placeholder:"N"`
	Groups       int           `help:"Run only the groups scenario: GET /v1/groups's latency over a view of N tenants with a realistic spread of faults (1,000,000 for the documented figure); 0 runs the other scenarios." placeholder:"N"`
	Deadlines    int           `help:"Run only the deadlines scenario: how long after its deadline each stuck message reaches SUBSTATE_CHANGES while N tenants hold deadlines (100,000 for the documented figure); 0 runs the other scenarios." placeholder:"N"`
	Steady       time.Duration `help:"Run only the steady scenario: a view of --tenants tenants on a worker in a child process (its evidence check every 5 s), then --steady-rate status changes a second (2,000) over its HTTP ingress for this long; reports the worker's CPU per event alone, evidence check included (60s for the documented figure); 0 runs the other scenarios." placeholder:"DURATION"`
	SteadyRate   float64       `default:"2000" help:"Offered rate of the steady scenario, in status changes per second." placeholder:"N"`
	worker.Flags `embed:""`
}

// FlatFlags select the flat-cost scenario of the bench, which runs alone:
// many events over a fixed set of tenants, to show that what the worker
// and the NATS server hold stays flat as history grows instead of growing
// with it (the duplicate window, the view, the streams per event).
type FlatFlags struct {
	Flat      int           `help:"Run only the flat-cost scenario with this many events (10,000,000 for the documented figure); 0 runs the other scenarios." placeholder:"N"`
	FlatLimit time.Duration `default:"10m" help:"Stop the flat-cost scenario after this long, with as many events as fitted (0 = no limit)."`
}

// Run runs every scenario and prints the report; a wrong view is exit
// status 1.
func (c *BenchCmd) Run(ctx context.Context, m *Main) error {
	err := bench.Run(ctx, bench.Config{
		Events: c.Events, Tenants: c.Tenants, Rate: c.Rate, Duration: c.Duration,
		JSON: c.JSON, Keep: c.Keep, Profile: c.Profile, MemProfile: c.MemProfile,
		Flat: c.Flat, FlatLimit: c.FlatLimit, Groups: c.Groups, Deadlines: c.Deadlines, Incident: c.Incident, IncidentRate: c.IncidentRate,
		Steady: c.Steady, SteadyRate: c.SteadyRate, Flags: c.Flags,
	}, m.Stdout, m.Stderr)
	if errors.Is(err, bench.ErrWrongView) {
		return exitError{1}
	}
	return err
}
