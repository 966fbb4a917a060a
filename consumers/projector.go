package consumers

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/tracing"
)

// Projector is the durable pull consumer on SUBSTATE_EVENTS that keeps the
// tenant view. Each fetched batch is applied in one view transaction that
// also stores the batch's last stream sequence; messages are acknowledged
// only after that commit, and redelivered ones at or below the stored
// sequence are skipped. The view's commit writes the real changes into its
// change outbox, which publishers.ChangeFeed publishes.
//
// The view must see the stream in order: when a batch skips sequences the
// view has not seen, before its first message or between two of them (they
// are still awaiting redelivery, for example after a crash), the missing
// sequences are read from the stream directly, so the later redelivery is
// skipped instead of lost.
type Projector struct {
	Consumer    jetstream.Consumer
	Stream      jetstream.Stream // SUBSTATE_EVENTS, to read gaps
	Store       substate.ViewStore
	DeadLetters substate.DeadLetterPublisher
	BatchSize   int           // 0 means 512
	Linger      time.Duration // a batch ends when this passes without a message; 0 means 2 ms
	LingerMax   time.Duration // a small batch waits at most this long after its first; 0 means 2 ms
	Metrics     *Metrics
	// Tracer, when set, makes the spans of each batch and event (nil: no
	// tracing).
	Tracer *tracing.Tracer
	Logger *slog.Logger
	// HistoryUpTo is the stream sequence up to which the view fills from
	// nothing (a new replica, a view rebuilt after a stream loss): those
	// events' changes are history the view never lagged behind, and
	// their age is not observed as its freshness. 0 for none.
	HistoryUpTo uint64
	// Normalized, when set, makes a deadline wait for the normalizer: it
	// fires only once every raw message stored at or before it is
	// normalized and applied. Nil waits for SUBSTATE_EVENTS alone (a
	// projector fed canonical events directly).
	Normalized *Normalized

	trace    tracing.Stage
	next     uint64 // the stream sequence the view expects next
	ackAll   bool   // the consumer's acks are cumulative
	dlq      stageDLQ
	failures failures // the batches that failed in a row

	// What the deadline loop needs to know (deadlines.go): whether the
	// view has caught up with the stream, and a signal after each batch.
	mu       sync.Mutex
	caught   caughtUp
	progress chan struct{}
}

// Failing reports since when every batch the projector handled failed to
// reach the view, and the last batch's error; the error is nil while
// batches succeed (or none came). A view that cannot be written (a
// corrupt page, a full disk) fails every batch.
func (p *Projector) Failing() (since time.Time, err error) { return p.failures.failing() }

// Run applies batches until ctx is done, then finishes the batch in hand.
// When the Store keeps deadlines, the deadline loop (deadlines.go) runs
// beside it until then.
func (p *Projector) Run(ctx context.Context) error {
	cp, err := p.Store.Checkpoint(ctx)
	if err != nil {
		return err
	}
	p.next = cp + 1
	p.dlq = stageDLQ{stage: substate.StageProject, pub: p.DeadLetters, metrics: p.Metrics, log: p.logger()}
	if info := p.Consumer.CachedInfo(); info != nil {
		p.ackAll = info.Config.AckPolicy == jetstream.AckAllPolicy
	}
	p.trace = traceStage(p.Consumer, tracing.TemplateEvents)
	pl := puller{consumer: p.Consumer, batchSize: cmp.Or(p.BatchSize, 512), linger: p.Linger, lingerMax: p.LingerMax, logger: p.logger()}
	if ds, ok := p.Store.(substate.DeadlineStore); ok {
		p.progress = make(chan struct{}, 1)
		p.noteApplied(cp)
		if err := p.readStreamEnd(ctx); err != nil {
			p.noteEnd(math.MaxUint64) // behind until the loop reads it
			p.logger().Warn("deadlines: cannot read the event stream's end; no deadline fires until it can", "err", err)
		}
		dctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { p.runDeadlines(dctx, ds) })
		defer func() { stop(); wg.Wait() }()
	}
	return pl.run(ctx, p.handle)
}

func (p *Projector) handle(ctx context.Context, batch []jetstream.Msg) {
	p.Metrics.observeBatch(substate.StageProject, len(batch))
	tb := p.Tracer.Batch(p.trace, batch)
	events, seqs, err := p.decode(ctx, batch, tb)
	if err == nil {
		events, err = p.fillGaps(ctx, events, seqs)
	}
	if err == nil {
		err = p.apply(ctx, events, tb)
	}
	tb.End(err)
	if err == nil && len(seqs) > 0 {
		p.next = max(p.next, seqs[len(seqs)-1]+1)
		if p.progress != nil {
			p.noteApplied(p.next - 1)
		}
	}
	if err != nil {
		// Not acknowledged: redelivered later, and the checkpoint (which did
		// not move) makes that safe. Stop here so nothing later is applied
		// before these.
		p.failures.fail(p.logger(), "apply batch failed; will be redelivered", err)
		for _, m := range batch {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	p.failures.succeed(p.logger(), "batches apply again")
	p.ack(batch, seqs)
}

// ack acknowledges a committed batch. On the worker's consumer, whose acks
// are cumulative (see bus.ProjectorConsumerConfig), one ack of the message
// with the highest sequence covers the batch; otherwise each is acked.
func (p *Projector) ack(batch []jetstream.Msg, seqs []uint64) {
	if !p.ackAll || len(seqs) == 0 {
		for _, m := range batch {
			p.dlq.ack(m)
		}
		return
	}
	last := seqs[len(seqs)-1]
	for i := len(batch) - 1; i >= 0; i-- { // delivered in order: usually the last
		if meta, err := batch[i].Metadata(); err == nil && meta.Sequence.Stream == last {
			p.dlq.ack(batch[i])
			return
		}
	}
}

// decode turns messages into sequenced events; a message that is not a
// canonical event is dead-lettered, and acknowledged with the batch. It
// also returns the stream sequences of the batch, dead-lettered ones
// included, in order. It fails when a dead letter cannot be stored: the
// batch is then handed back whole, so that no ack covers that message.
func (p *Projector) decode(ctx context.Context, batch []jetstream.Msg, tb *tracing.Batch) ([]substate.Sequenced, []uint64, error) {
	out := make([]substate.Sequenced, 0, len(batch))
	seqs := make([]uint64, 0, len(batch))
	var end uint64 // the stream's last sequence, as the messages say
	defer func() { p.noteEnd(end) }()
	for _, m := range batch {
		meta, err := m.Metadata()
		if err != nil {
			// Without a sequence it cannot be acked with the batch.
			p.dlq.deadLetter(ctx, m, substate.WrapError(substate.EINVALID, err, "no jetstream metadata"))
			continue
		}
		seqs = append(seqs, meta.Sequence.Stream)
		end = max(end, meta.Sequence.Stream+meta.NumPending)
		e, err := substate.UnmarshalEvent(m.Data())
		if err != nil {
			if err := p.dlq.store(ctx, m, err, ""); err != nil {
				return nil, nil, err
			}
			tb.DeadLetter(m, err)
			continue
		}
		hop := tb.Process(m, meta.Sequence.Stream, &e)
		out = append(out, substate.Sequenced{Seq: meta.Sequence.Stream, Event: e.Data, ID: e.ID, TraceParent: e.TraceParent, Hop: hop})
	}
	slices.Sort(seqs)
	return sortSequenced(out), slices.Compact(seqs), nil
}

// sortSequenced sorts events by sequence and drops repeated sequences.
func sortSequenced(events []substate.Sequenced) []substate.Sequenced {
	slices.SortFunc(events, func(a, b substate.Sequenced) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(events, func(a, b substate.Sequenced) bool { return a.Seq == b.Seq })
}

func (p *Projector) apply(ctx context.Context, events []substate.Sequenced, tb *tracing.Batch) error {
	if len(events) == 0 {
		return nil
	}
	res, err := p.Store.Apply(ctx, events)
	if err != nil {
		return err
	}
	p.observe(res)
	tb.Applied(&res)
	p.Metrics.observeSLOs(res.Changes)
	p.Metrics.observeApplied(res.Changes, time.Now(), p.HistoryUpTo)
	return nil
}

func (p *Projector) observe(res substate.ApplyResult) {
	if m := p.Metrics; m != nil {
		m.Applied.Add(float64(len(res.Changes)))
		m.Unchanged.Add(float64(res.Unchanged))
		m.Stale.Add(float64(res.Stale))
		m.Redelivered.Add(float64(res.Skipped))
		if res.Committed {
			m.Commits.Inc()
			m.WrittenBytes.Add(float64(res.BytesWritten))
		}
	}
}

// fillGaps reads from the stream the sequences the view has not seen that
// are missing before or between the batch's sequences seqs (sorted): a
// message the batch skips is still awaiting redelivery, and once a later
// one is applied its redelivery would be skipped as already applied.
func (p *Projector) fillGaps(ctx context.Context, events []substate.Sequenced, seqs []uint64) ([]substate.Sequenced, error) {
	if p.Stream == nil {
		return events, nil
	}
	var missing []substate.Sequenced
	var first uint64 // the stream's first sequence, read at the first gap
	next := p.next
	for _, seq := range seqs {
		if seq > next {
			if first == 0 {
				info, err := p.Stream.Info(ctx)
				if err != nil {
					return nil, err
				}
				first = max(info.State.FirstSeq, 1)
			}
			m, err := p.readRange(ctx, max(next, first), seq)
			if err != nil {
				return nil, err
			}
			missing = append(missing, m...)
		}
		next = max(next, seq+1)
	}
	if len(missing) == 0 {
		return events, nil
	}
	return sortSequenced(append(missing, events...)), nil
}

// readRange reads the canonical events of sequences from to to-1 from the
// stream; a sequence removed by retention, deleted or not a canonical
// event (dead-lettered when its own delivery arrives) is left out.
func (p *Projector) readRange(ctx context.Context, from, to uint64) ([]substate.Sequenced, error) {
	var out []substate.Sequenced
	for seq := from; seq < to; seq++ {
		raw, err := p.Stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		e, err := substate.UnmarshalEvent(raw.Data)
		if err != nil {
			continue
		}
		out = append(out, substate.Sequenced{Seq: seq, Event: e.Data, ID: e.ID, TraceParent: e.TraceParent})
	}
	if from < to {
		p.logger().Warn("read a gap in the event stream directly", "from", from, "to", to-1, "events", len(out))
	}
	return out, nil
}

func (p *Projector) logger() *slog.Logger {
	return cmp.Or(p.Logger, slog.New(slog.DiscardHandler))
}
