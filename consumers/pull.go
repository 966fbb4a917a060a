package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller reads a durable pull consumer and hands its messages over in
// batches: a batch starts with the first message to arrive and takes what
// else arrives for a linger. Then it ends, unless messages still come and
// it holds fewer than lingerEnough: such a batch goes on, a linger at a
// time, until a linger passes without a message, lingerMax has passed
// since its first, or it holds lingerEnough. It ends at once when it holds
// batchSize. Under load batches fill at once, or hold enough after one
// linger, as they always did; a message that arrives alone waits one
// linger; at a moderate rate a batch gathers for up to lingerMax, so one
// view commit, its fsyncs and acks serve tens of events, not the few one
// linger brings. (A longer wait for large batches saves no CPU and, in a
// closed loop, costs throughput: BenchmarkChanges.)
//
// It reads with the client's Consume callback rather than its message
// iterator: the iterator makes a timer, a heartbeat monitor and an option
// for every message it hands over (about a dozen allocations an event over
// the normalizer and the projector), where the callback only passes the
// message on and one timer serves every batch's linger.
type puller struct {
	consumer  jetstream.Consumer
	batchSize int
	linger    time.Duration // 0 means DefaultLinger
	lingerMax time.Duration // 0 means DefaultLingerMax, and never below linger
	logger    *slog.Logger
}

// DefaultLinger and DefaultLingerMax are a stage's batch lingers when
// none is set: a batch ends 2 ms after its first message, as it always
// did. A longer lingerMax lets a small batch gather more at moderate
// rates; it is the worker's --batch-linger-max, measured in
// docs/performance.md (less CPU at a steady 2,000 events/s, less
// throughput when saturated), so the default stays at the linger.
const (
	DefaultLinger    = 2 * time.Millisecond
	DefaultLingerMax = DefaultLinger
)

// lingerEnough is the size at which a batch shares its commit and acks
// among enough messages to stop waiting beyond one linger (or the batch
// size, when smaller).
const lingerEnough = 64

// run pulls until ctx is done, then drains: messages already delivered to
// this process are still handed to handle (with a context that is not
// cancelled) so none is left unacknowledged.
func (p *puller) run(ctx context.Context, handle func(context.Context, []jetstream.Msg)) error {
	size := cmp.Or(p.batchSize, 256)
	msgs := make(chan jetstream.Msg, size)
	left := make(chan struct{}) // run returned: a blocked callback gives up
	defer close(left)
	cc, err := p.consumer.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-left: // not acknowledged: the server delivers it again
		}
	}, jetstream.PullMaxMessages(2*size), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		p.logger.Debug("pull consumer", "err", err)
	}))
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-ctx.Done():
			cc.Drain()
		case <-left:
			cc.Stop()
		}
	}()
	work := context.WithoutCancel(ctx)
	linger := cmp.Or(p.linger, DefaultLinger)
	b := batcher{msgs: msgs, closed: cc.Closed(), linger: linger, lingerMax: max(cmp.Or(p.lingerMax, DefaultLingerMax), linger), enough: min(lingerEnough, size),
		timer: time.NewTimer(time.Hour), batch: make([]jetstream.Msg, 0, size)}
	b.timer.Stop()
	for {
		closed := b.fill()
		if len(b.batch) > 0 {
			handle(work, b.batch)
			b.batch = b.batch[:0]
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

// ErrPullStopped is the error of a pull consumer whose consuming stopped
// (its connection closed, its consumer gone) while the stage was still
// meant to run.
var ErrPullStopped = errors.New("pull consumer stopped unexpectedly")

// name names the consumer for an error.
func (p *puller) name() string {
	if info := p.consumer.CachedInfo(); info != nil {
		return info.Stream + "/" + info.Name
	}
	return "consumer"
}

// batcher gathers the messages the consume callback passes on into
// batches.
type batcher struct {
	msgs      <-chan jetstream.Msg
	closed    <-chan struct{} // consuming stopped: no message comes after those buffered
	linger    time.Duration   // a batch takes what comes for this, then ends unless it may go on
	lingerMax time.Duration   // a batch below enough may go on until this long after its first message
	enough    int             // a batch this large ends after one linger
	timer     *time.Timer     // the linger of the batch being filled
	batch     []jetstream.Msg
	now       func() time.Time // nil means time.Now
}

// fill blocks for the first message of a batch, then adds what arrives
// for a linger, and goes on a linger at a time while messages came during
// the last one and the batch is below enough, never past lingerMax after
// the first; it stops at once when the batch is full. It reports whether
// consuming stopped and every message it delivered is in a batch.
//
// The timer is not reset for every message, so a batch that goes on ends
// between one and two lingers after its last message.
func (b *batcher) fill() bool {
	select {
	case m := <-b.msgs:
		b.batch = append(b.batch, m)
	case <-b.closed:
		return b.rest()
	}
	now := b.now
	if now == nil {
		now = time.Now
	}
	end := now().Add(b.lingerMax)
	b.timer.Reset(min(b.linger, b.lingerMax))
	defer b.timer.Stop()
	came := false // a message arrived during the current linger
	for len(b.batch) < cap(b.batch) {
		select {
		case m := <-b.msgs:
			b.batch = append(b.batch, m)
			came = true
		case <-b.timer.C:
			left := end.Sub(now())
			if !came || len(b.batch) >= b.enough || left <= 0 {
				return false // quiet for a linger, large enough, or lingerMax over
			}
			came = false
			b.timer.Reset(min(b.linger, left))
		case <-b.closed:
			return b.rest()
		}
	}
	return b.stopped()
}

// stopped reports, for a batch that filled up, whether consuming has
// stopped with no message left behind it, so a full last batch ends the
// stage without another empty fill.
func (b *batcher) stopped() bool {
	select {
	case <-b.closed:
		return len(b.msgs) == 0
	default:
		return false
	}
}

// rest adds the messages still buffered after consuming stopped, as many
// as the batch holds, and reports whether none is left.
func (b *batcher) rest() bool {
	for len(b.batch) < cap(b.batch) {
		select {
		case m := <-b.msgs:
			b.batch = append(b.batch, m)
		default:
			return true
		}
	}
	return len(b.msgs) == 0
}
