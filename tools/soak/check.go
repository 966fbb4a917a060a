package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// check waits for the last worker to settle, then compares every
// tenant's view with its last acknowledged step and verifies the view
// against the stream and its evidence, as "substate verify" does.
func (s *soak) check(ctx context.Context, res *soakResult) error {
	nkey := (bus.Credentials{Dir: worker.NATSCredentialsDir(s.dir)}).SeedFile(bus.Worker)
	b, err := bus.Open(bus.Config{URL: "nats://" + s.nats, NkeyFile: nkey})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }() // a reading connection
	if err := waitIdle(ctx, b, 2*time.Minute); err != nil {
		return err
	}
	for t := range s.acked {
		want := s.acked[t].Load()
		if want == 0 {
			continue
		}
		v, err := s.tenant(ctx, soakTenant(t))
		if err != nil || v.LastEventAt.Before(soakBase.Add(time.Duration(want)*time.Millisecond)) {
			res.Lost++
		}
	}
	info, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return err
	}
	res.EventsInStream = info.CachedInfo().State.Msgs
	if n := uint64(res.Acked); res.EventsInStream > n {
		res.DuplicatesFound = res.EventsInStream - n // posts stored but not answered 202 count here too
	}
	v := &replay.Verify{JS: b.JetStream, BatchSize: replay.DefaultBatchSize, Normalizer: bus.ConsumerNormalizer}
	found, err := v.Run(ctx, &httpapi.Client{URL: "http://" + s.http}, true)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	res.VerifyEqual = !found.Failed()
	res.Tenants = len(s.acked)
	return nil
}

// tenant reads one tenant's view from the worker.
func (s *soak) tenant(ctx context.Context, id string) (substate.TenantView, error) {
	ctx, cancel := context.WithTimeout(ctx, soakClient.Timeout)
	defer cancel()
	return (&httpapi.Client{URL: "http://" + s.http}).Tenant(ctx, id)
}

// waitIdle waits until the normalizer and the projector have nothing
// pending and nothing unacknowledged, and the view has applied the last
// event of the stream.
func waitIdle(ctx context.Context, b *bus.Bus, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		busy, err := PipelineBusy(ctx, b.JetStream)
		if err != nil {
			busy = err.Error()
		} else if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the worker did not settle: %s", busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PipelineBusy says what the normalizer or the projector still has to do
// (messages pending or unacknowledged); "" when nothing.
func PipelineBusy(ctx context.Context, js jetstream.JetStream) (string, error) {
	for _, c := range []struct{ stream, name string }{{substate.StreamRaw, bus.ConsumerNormalizer}, {substate.StreamEvents, bus.ProjectorConsumer("")}} {
		info, err := bench.ConsumerInfo(ctx, js, c.stream, c.name)
		if err != nil {
			return "", err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Sprintf("%s: %d pending, %d unacknowledged", c.name, info.NumPending, info.NumAckPending), nil
		}
	}
	return "", nil
}

// printSoak prints the figures.
func printSoak(w io.Writer, r soakResult, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return
	}
	verdict := "equal"
	if !r.VerifyEqual {
		verdict = "DIFFERENT"
	}
	fmt.Fprintf(w, "kill -9 cycles          %d in %.0f s\n", r.Cycles, r.Seconds)
	fmt.Fprintf(w, "events acknowledged     %d (%.0f/s, restarts included); %d posts refused or unanswered and retried\n", r.Acked, r.AckedPerSecond, r.Refused)
	fmt.Fprintf(w, "restart to ready        p50 %.2f s, max %.2f s\n", r.RestartP50, r.RestartMax)
	fmt.Fprintf(w, "lost                    %d of %d tenants miss an acknowledged event\n", r.Lost, r.Tenants)
	fmt.Fprintf(w, "canonical events        %d stored for %d acknowledged (%d more: posts stored but unanswered, retried)\n", r.EventsInStream, r.Acked, r.DuplicatesFound)
	fmt.Fprintf(w, "verify                  %s\n", verdict)
}
