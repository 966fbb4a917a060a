package consumers

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Projector is the durable pull consumer on SUBSTATE_EVENTS that keeps the
// tenant view. Each fetched batch is applied in one view transaction that
// also stores the batch's last stream sequence; messages are acknowledged
// only after that commit, and redelivered ones at or below the stored
// sequence are skipped. Real changes go on the change feed after the commit.
//
// The view must see the stream in order: when a message arrives past a gap
// (an earlier one is still awaiting redelivery, for example after a
// reconnect), the missing sequences are read from the stream directly, so
// the later redelivery is skipped instead of lost.
type Projector struct {
	Consumer    jetstream.Consumer
	Stream      jetstream.Stream // SUBSTATE_EVENTS, to read gaps
	Store       substate.ViewStore
	Changes     substate.ChangePublisher // optional
	DeadLetters substate.DeadLetterPublisher
	BatchSize   int           // 0 means 512
	Linger      time.Duration // 0 means 2 ms
	Metrics     *Metrics
	Logger      *slog.Logger

	next uint64 // the stream sequence the view expects next
}

// Run applies batches until ctx is done, then finishes the batch in hand.
func (p *Projector) Run(ctx context.Context) error {
	cp, err := p.Store.Checkpoint(ctx)
	if err != nil {
		return err
	}
	p.next = cp + 1
	pl := puller{consumer: p.Consumer, batchSize: cmp.Or(p.BatchSize, 512), linger: p.Linger, logger: p.logger()}
	return pl.run(ctx, p.handle)
}

func (p *Projector) handle(ctx context.Context, batch []jetstream.Msg) {
	p.Metrics.observeBatch(substate.StageProject, len(batch))
	events := p.decode(ctx, batch)
	events, err := p.fillGaps(ctx, events)
	if err == nil {
		err = p.apply(ctx, events)
	}
	if err != nil {
		// Not acknowledged: redelivered later, and the checkpoint (which did
		// not move) makes that safe. Stop here so nothing later is applied
		// before these.
		p.logger().Error("apply batch failed; will be redelivered", "err", err)
		for _, m := range batch {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	for _, m := range batch {
		ack(m, p.logger())
	}
}

// decode turns messages into sequenced events; a message that is not a
// canonical event is dead-lettered (and acknowledged) at once.
func (p *Projector) decode(ctx context.Context, batch []jetstream.Msg) []substate.Sequenced {
	out := make([]substate.Sequenced, 0, len(batch))
	for _, m := range batch {
		meta, err := m.Metadata()
		if err != nil {
			p.deadLetter(ctx, m, substate.WrapError(substate.EINVALID, err, "no jetstream metadata"))
			continue
		}
		e, err := substate.UnmarshalEvent(m.Data())
		if err != nil {
			p.deadLetter(ctx, m, err)
			continue
		}
		out = append(out, substate.Sequenced{Seq: meta.Sequence.Stream, Event: e.Data})
	}
	slices.SortFunc(out, func(a, b substate.Sequenced) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b substate.Sequenced) bool { return a.Seq == b.Seq })
}

func (p *Projector) apply(ctx context.Context, events []substate.Sequenced) error {
	if len(events) == 0 {
		return nil
	}
	res, err := p.Store.Apply(ctx, events)
	if err != nil {
		return err
	}
	if last := events[len(events)-1].Seq; last >= p.next {
		p.next = last + 1
	}
	p.observe(res)
	if p.Changes != nil && len(res.Changes) > 0 {
		if err := p.Changes.PublishChanges(ctx, res.Changes); err != nil {
			p.logger().Warn("change feed publish failed", "changes", len(res.Changes), "err", err)
		} else if p.Metrics != nil {
			p.Metrics.ChangesEmitted.Add(float64(len(res.Changes)))
		}
	}
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

// fillGaps reads from the stream the sequences between what the view
// expects and the first message of the batch.
func (p *Projector) fillGaps(ctx context.Context, events []substate.Sequenced) ([]substate.Sequenced, error) {
	if len(events) == 0 || p.Stream == nil || events[0].Seq <= p.next {
		return events, nil
	}
	info, err := p.Stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	var missing []substate.Sequenced
	for seq := max(p.next, info.State.FirstSeq); seq < events[0].Seq; seq++ {
		raw, err := p.Stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed by retention or deleted
		} else if err != nil {
			return nil, err
		}
		e, err := substate.UnmarshalEvent(raw.Data)
		if err != nil {
			continue // dead-lettered when its own delivery arrives
		}
		missing = append(missing, substate.Sequenced{Seq: seq, Event: e.Data})
	}
	if len(missing) > 0 {
		p.logger().Warn("read a gap in the event stream directly", "from", p.next, "to", events[0].Seq-1, "events", len(missing))
	}
	return append(missing, events...), nil
}

func (p *Projector) deadLetter(ctx context.Context, m jetstream.Msg, err error) {
	Retry{}.deadLetter(ctx, m, substate.StageProject, err, p.DeadLetters, p.Metrics, p.logger())
}

func (p *Projector) logger() *slog.Logger {
	return cmp.Or(p.Logger, slog.New(slog.DiscardHandler))
}
