package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// LiveClient reads a running worker's view: httpapi.Client is one.
type LiveClient interface {
	// Ready returns why the worker is not ready; nil when it is.
	Ready(ctx context.Context) error
	// Applied returns the last SUBSTATE_EVENTS sequence the view reflects
	// (the applied position of GET /v1/view/checkpoint).
	Applied(ctx context.Context) (uint64, error)
	// AllTenants returns every tenant of the view that f matches.
	AllTenants(ctx context.Context, f substate.TenantFilter) ([]substate.TenantView, error)
}

// Live is a running worker's view, read between two readings of its
// position: the events From+1 to To were applied while it was read.
type Live struct {
	From, To uint64
	Tenants  []substate.TenantView
}

// Reads of a live view that keeps moving.
const (
	liveAttempts = 5
	livePause    = 100 * time.Millisecond // times the attempt
)

// ReadLive reads every tenant of the view of the worker c reaches,
// between two readings of its position; while the view keeps moving it
// tries a few times, then accepts the window (Verify.Compare leaves the
// tenants that moved in it out). A worker that reports its view corrupt
// fails the read in its own words, which name the file, the page and the
// rebuild command.
func ReadLive(ctx context.Context, c LiveClient) (Live, error) {
	var lv Live
	if err := checkReady(ctx, c); err != nil {
		return lv, err
	}
	for attempt := 1; ; attempt++ {
		var err error
		if lv.From, err = c.Applied(ctx); err != nil {
			return lv, err
		}
		if lv.Tenants, err = c.AllTenants(ctx, substate.TenantFilter{Limit: 1000}); err != nil {
			return lv, err
		}
		if lv.To, err = c.Applied(ctx); err != nil {
			return lv, err
		}
		if lv.From == lv.To || attempt == liveAttempts {
			return lv, nil
		}
		if err := timex.Sleep(ctx, time.Duration(attempt)*livePause); err != nil {
			return lv, err
		}
	}
}

// checkReady fails on a worker that found its view corrupt; any other
// reason it is not ready (catching up, NATS away, no worker) is left to
// the reads that follow to say what they can.
func checkReady(ctx context.Context, c LiveClient) error {
	err := c.Ready(ctx)
	if msg := substate.ErrorMessage(err); err != nil && strings.Contains(msg, "is corrupt") {
		return fmt.Errorf("the worker's view is not usable: %s", msg)
	}
	return nil
}
