package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/worker"
)

// benchPipeline is the worker one bench scenario runs on: the real worker
// (embedded NATS server or --nats-url, streams, normalizer, projector,
// bbolt view) on a data directory of its own, its view wrapped in a probe.
type benchPipeline struct {
	w     *worker.Worker
	view  *state.DB
	probe *viewProbe
	pub   *publishers.JetStream
	dir   string
}

// openPipeline opens a fresh worker under dir with the given batch size,
// logging to logs; keys is the number of status changes the probe can
// tell apart.
func openPipeline(ctx context.Context, f worker.Flags, logs *os.File, dir string, batch, keys int) (*benchPipeline, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	f.DataDir, f.BatchSize = dir, batch
	f.SFNReconcile = "off" // the bench's executions exist nowhere to poll
	f.Role, f.Instance = worker.RoleAll, ""
	w := worker.New(f)
	w.Logger = f.LoggerTo(logs)
	if err := w.Open(ctx); err != nil {
		return nil, err
	}
	p := &benchPipeline{w: w, view: w.View, probe: newViewProbe(w.View, keys), pub: publishers.NewJetStream(w.Bus.JetStream), dir: dir}
	w.Projector.Store = p.probe
	return p, nil
}

// run starts the given stages of the worker; the returned function stops
// them, lets each finish the batch in hand, and returns their error.
func (p *benchPipeline) run(stages ...func(context.Context) error) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.RunGroup(ctx, stages...) }()
	return func() error {
		cancel()
		return <-done
	}
}

// normalize and project are the worker's two pipeline stages.
func (p *benchPipeline) normalize(ctx context.Context) error { return p.w.Normalizer.Run(ctx) }
func (p *benchPipeline) project(ctx context.Context) error   { return p.w.Projector.Run(ctx) }

// feed drains the view's outbox to the change feed, as the worker does
// beside its projector; without a change feed it waits for the end.
func (p *benchPipeline) feed(ctx context.Context) error {
	if p.w.Changes == nil {
		<-ctx.Done()
		return nil
	}
	return p.w.Changes.Run(ctx)
}

// sender returns a sender of the load's events through this pipeline.
func (p *benchPipeline) sender(load benchLoad, window int) *sender {
	return &sender{pub: p.pub, load: load, probe: p.probe, window: window, inflight: 2048, base: p.probe.events.Load()}
}

// waitNormalized blocks until SUBSTATE_EVENTS holds n messages and the
// normalizer has acknowledged everything it was given.
func (p *benchPipeline) waitNormalized(ctx context.Context, n uint64, idle time.Duration) error {
	return waitCount(ctx, n, idle, "the normalizer published", func() (uint64, bool, error) {
		s, err := p.w.Bus.JetStream.Stream(ctx, substate.StreamEvents)
		if err != nil {
			return 0, false, err
		}
		return s.CachedInfo().State.Msgs, true, nil
	})
}

// waitCount polls count until it reaches n and says it is settled, and
// gives up when it did not move for idle; what names the count in the
// error.
func waitCount(ctx context.Context, n uint64, idle time.Duration, what string, count func() (uint64, bool, error)) error {
	return waitCountEvery(ctx, n, idle, 5*time.Millisecond, what, count)
}

// waitCountEvery is waitCount asking count every so often.
func waitCountEvery(ctx context.Context, n uint64, idle, every time.Duration, what string, count func() (uint64, bool, error)) error {
	last, since := uint64(0), time.Now()
	for {
		got, settled, err := count()
		if err != nil {
			return err
		}
		if got >= n && settled {
			return nil
		}
		if got != last {
			last, since = got, time.Now()
		} else if time.Since(since) > idle {
			return fmt.Errorf("bench: %s %d of %d events and nothing for %s", what, got, n, idle)
		}
		if err := timex.Sleep(ctx, every); err != nil {
			return err
		}
	}
}

// canonicalBytes returns the mean size of a canonical event as
// SUBSTATE_EVENTS stores it, headers included, or 0 when it holds none.
func canonicalBytes(ctx context.Context, js jetstream.JetStream) float64 {
	s, err := js.Stream(ctx, substate.StreamEvents)
	if err != nil || s.CachedInfo().State.Msgs == 0 {
		return 0
	}
	st := s.CachedInfo().State
	return float64(st.Bytes) / float64(st.Msgs)
}

// close closes the worker and its data directory (see release).
func (p *benchPipeline) close(keep bool) error { return release(p.w.Bus, p.w.Close, p.dir, keep) }

// release undoes what a scenario set up: on a shared NATS server
// (--nats-url) it deletes the streams the bench made, then closes what
// holds the connection (the worker, or the bus itself) and removes the
// scenario's directory unless keep is set.
func release(nats *bus.Bus, closeAll func() error, dir string, keep bool) error {
	var errs []error
	if !nats.Embedded() {
		errs = append(errs, deleteStreams(context.Background(), nats.JetStream))
	}
	errs = append(errs, closeAll())
	if !keep {
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// benchStreams are the streams a bench run creates.
var benchStreams = []string{substate.StreamRaw, substate.StreamEvents, substate.StreamDLQ, substate.StreamAudit, substate.StreamChanges,
	substate.StreamUnresolved, substate.StreamActions, substate.StreamLeases}

// deleteStreams deletes substate's streams.
func deleteStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, s := range benchStreams {
		if err := js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("bench: delete stream %s: %w", s, err)
		}
	}
	return nil
}

// checkSharedServer refuses a --nats-url server that already holds
// substate's streams: the bench deletes what it creates, and must never
// touch a deployment's data.
func checkSharedServer(ctx context.Context, f worker.Flags) error {
	if f.NATSURL == "" {
		return nil
	}
	b, err := bus.Open(f.BusConfig(nil))
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }() // a connection only asked about streams
	for _, s := range benchStreams {
		if _, err := b.JetStream.Stream(ctx, s); err == nil {
			return substate.Errorf(substate.EEXISTS, "bench: stream %s exists on %s; the bench needs a NATS server or account without substate's streams (it creates and deletes its own)", s, b.ClientURL())
		}
	}
	return nil
}

// viewFileSize returns the size of the pipeline's view file.
func (p *benchPipeline) viewFileSize() int64 {
	return fileSize(filepath.Join(p.dir, worker.ViewFile("")))
}
