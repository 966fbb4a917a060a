package consumers

import (
	"cmp"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/tracing"
)

// Normalizer is the durable pull consumer on SUBSTATE_RAW: it maps each raw
// provider payload to canonical events, publishes them on SUBSTATE_EVENTS
// and acknowledges the raw message only after every publish was
// acknowledged. Input the mapper rejects goes to the dead-letter stream at
// once with its reason.
type Normalizer struct {
	Consumer jetstream.Consumer
	Mapper   substate.Mapper
	// EventID is the deterministic id of the i-th canonical event of a raw
	// event, so a redelivered or re-normalized raw event is deduplicated.
	EventID     func(raw substate.RawEvent, i int) string
	Events      substate.EventPublisher
	DeadLetters substate.DeadLetterPublisher
	// Unresolved remembers the executions without tenant already
	// dead-lettered, so that only the first event of each is (see
	// reject); nil dead-letters every one.
	Unresolved substate.UnresolvedMemory
	Retry      Retry
	BatchSize  int           // messages per batch; 0 means 256
	Linger     time.Duration // a batch ends when this passes without a message; 0 means 2 ms
	LingerMax  time.Duration // a small batch waits at most this long after its first; 0 means 2 ms
	Metrics    *Metrics
	// Tracer, when set, makes the spans of each batch and event (nil: no
	// tracing).
	Tracer *tracing.Tracer
	Logger *slog.Logger

	dlq   stageDLQ
	trace tracing.Stage
}

// Run consumes until ctx is done, then finishes the batch in hand.
func (n *Normalizer) Run(ctx context.Context) error {
	n.dlq = stageDLQ{stage: substate.StageNormalize, pub: n.DeadLetters, retry: n.Retry, metrics: n.Metrics, log: n.logger()}
	n.trace = traceStage(n.Consumer, tracing.TemplateRaw)
	p := puller{consumer: n.Consumer, batchSize: n.BatchSize, linger: n.Linger, lingerMax: n.LingerMax, logger: n.logger()}
	return p.run(ctx, n.handle)
}

// normalized is one raw message, the canonical events it maps to and
// their spans.
type normalized struct {
	msg    jetstream.Msg
	events []substate.Event
	spans  tracing.Spans
}

func (n *Normalizer) handle(ctx context.Context, batch []jetstream.Msg) {
	n.Metrics.observeBatch(substate.StageNormalize, len(batch))
	tb := n.Tracer.Batch(n.trace, batch)
	defer tb.End(nil)
	ok := make([]normalized, 0, len(batch))
	out := make([]substate.Event, 0, len(batch)) // a message maps to one event, most often
	for _, msg := range batch {
		m, more, err := n.normalize(msg, tb, out)
		out = more
		if err != nil {
			tb.DeadLetter(msg, err)
			n.reject(ctx, msg, err)
			continue
		}
		ok = append(ok, m)
	}
	if err := n.Events.PublishEvents(ctx, out); err != nil {
		if len(ok) == 1 {
			ok[0].spans.End(err)
			n.dlq.fail(ctx, ok[0].msg, err)
			return
		}
		n.publishEach(ctx, ok)
		return
	}
	for _, m := range ok {
		m.spans.End(nil)
		n.Metrics.countNormalized(m.events)
		n.dlq.ack(m.msg)
	}
}

// publishEach publishes the events of each message of a batch whose
// publish failed on their own, so that one message that cannot be
// published (too large for the server, say) fails alone: it is handed
// back and dead-lettered after its deliveries run out, and the others of
// its batch go on. Events the batch publish stored already are
// deduplicated by their ids.
func (n *Normalizer) publishEach(ctx context.Context, batch []normalized) {
	for _, m := range batch {
		err := n.Events.PublishEvents(ctx, m.events)
		m.spans.End(err)
		if err != nil {
			n.dlq.fail(ctx, m.msg, err)
			continue
		}
		n.Metrics.countNormalized(m.events)
		n.dlq.ack(m.msg)
	}
}

// normalize maps one raw message to canonical events, appends them to
// out, the batch's events so far, and starts their spans in tb. The
// message's own events are the part of out they were appended as; a
// message that fails leaves out as it was.
func (n *Normalizer) normalize(msg jetstream.Msg, tb *tracing.Batch, out []substate.Event) (normalized, []substate.Event, error) {
	raw, err := rawEvent(msg)
	if err != nil {
		return normalized{}, out, err
	}
	data, err := n.Mapper.Map(raw)
	if err != nil {
		return normalized{}, out, err
	}
	ref := substate.RawRef{ID: raw.ID}
	if meta, err := msg.Metadata(); err == nil {
		ref.Seq = meta.Sequence.Stream
	}
	tp := traceParentOf(&raw)
	start := len(out)
	for i := range data {
		if err := data[i].Validate(); err != nil {
			return normalized{}, out[:start], err
		}
		e := substate.NewEvent(n.EventID(raw, i), data[i])
		e.Raw = ref // the audit trail back to the provider's payload
		e.TraceParent = tp
		out = append(out, e)
	}
	events := out[start:len(out):len(out)] // capped: the next message's events are not its own
	return normalized{msg: msg, events: events, spans: tb.PublishEvents(tp, &raw, events)}, out, nil
}

// rawEvent rebuilds the raw event of a message on substate.raw.<kind>. A
// message published without an id is identified by its stream sequence.
func rawEvent(msg jetstream.Msg) (substate.RawEvent, error) {
	kind, ok := strings.CutPrefix(msg.Subject(), substate.SubjectRawPrefix)
	if !ok {
		return substate.RawEvent{}, substate.Errorf(substate.EINVALID, "subject %q is not a raw subject", msg.Subject())
	}
	id := msg.Headers().Get(substate.HeaderMsgID)
	if id == "" {
		meta, err := msg.Metadata()
		if err != nil {
			return substate.RawEvent{}, substate.WrapError(substate.EINVALID, err, "raw message has no id and no metadata")
		}
		id = "seq:" + strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	return substate.RawEvent{Kind: substate.RawKind(kind), ID: id, Body: msg.Data(), Header: rawHeaders(msg)}, nil
}

func (n *Normalizer) logger() *slog.Logger {
	return cmp.Or(n.Logger, slog.New(slog.DiscardHandler))
}
