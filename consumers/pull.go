package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller reads a durable pull consumer and hands its messages over in
// batches: a batch starts with the first message to arrive and takes what
// else arrives within Linger, up to BatchSize. Under load batches fill at
// once; when traffic is light a message waits at most Linger.
type puller struct {
	consumer  jetstream.Consumer
	batchSize int
	linger    time.Duration
	logger    *slog.Logger
}

// run pulls until ctx is done, then drains: messages already delivered to
// this process are still handed to handle (with a context that is not
// cancelled) so none is left unacknowledged.
func (p *puller) run(ctx context.Context, handle func(context.Context, []jetstream.Msg)) error {
	size := cmp.Or(p.batchSize, 256)
	it, err := p.consumer.Messages(jetstream.PullMaxMessages(2 * size))
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Drain()
		case <-done:
			it.Stop()
		}
	}()
	work := context.WithoutCancel(ctx)
	batch := make([]jetstream.Msg, 0, size)
	for {
		closed := p.fill(it, &batch, size)
		if len(batch) > 0 {
			handle(work, batch)
			batch = batch[:0]
		}
		if closed {
			if ctx.Err() == nil {
				// Nobody asked it to stop: the connection closed or the
				// consumer is gone. Returning nil would let the worker exit
				// 0 with a stage no longer running.
				return fmt.Errorf("%w: %s", ErrPullStopped, p.name())
			}
			return nil
		}
	}
}

// ErrPullStopped is the error of a pull consumer whose message iterator
// closed while the stage was still meant to run.
var ErrPullStopped = errors.New("pull consumer stopped unexpectedly")

// name names the consumer for an error.
func (p *puller) name() string {
	if info := p.consumer.CachedInfo(); info != nil {
		return info.Stream + "/" + info.Name
	}
	return "consumer"
}

// fill blocks for the first message of a batch, then adds what arrives
// until the linger time after it has passed. It reports whether the
// iterator is closed.
func (p *puller) fill(it jetstream.MessagesContext, batch *[]jetstream.Msg, size int) bool {
	var deadline time.Time
	for len(*batch) < size {
		var msg jetstream.Msg
		var err error
		if len(*batch) == 0 {
			msg, err = it.Next()
			deadline = time.Now().Add(cmp.Or(p.linger, 2*time.Millisecond))
		} else if wait := time.Until(deadline); wait > 0 {
			msg, err = it.Next(jetstream.NextMaxWait(wait))
		} else {
			return false // linger over
		}
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed), errors.Is(err, nats.ErrConnectionClosed):
			return true
		case err != nil && len(*batch) > 0:
			return false // linger over
		case err != nil:
			p.logger.Debug("pull consumer", "err", err)
			continue
		}
		*batch = append(*batch, msg)
	}
	return false
}
