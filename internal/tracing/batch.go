package tracing

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate"
)

// Stage names the consumer a batch is read by: the destination template
// it reads and its durable consumer (the consumer group).
type Stage struct {
	Template string // TemplateRaw, TemplateEvents
	Group    string // the durable consumer's name
}

// Batch is the process span of one batch a stage handles and the spans of
// its messages; nil when tracing is off.
type Batch struct {
	t     *Tracer
	span  trace.Span
	stage Stage
	// applied are the projector's spans of the events it applies, by
	// stream sequence.
	applied []seqSpan
}

type seqSpan struct {
	seq  uint64
	span trace.Span
}

// Batch starts the process span of a batch: a new root that links to the
// creation context of each message (its traceparent header), with the
// message's id on the link. End it with End.
func (t *Tracer) Batch(st Stage, msgs []jetstream.Msg) *Batch {
	if t == nil {
		return nil
	}
	links := make([]trace.Link, 0, len(msgs))
	for _, m := range msgs {
		h := m.Headers()
		if sc := Parse(h.Get(substate.HeaderTraceParent)); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				semconv.MessagingMessageID(h.Get(substate.HeaderMsgID)),
			}})
		}
	}
	_, span := t.tracer.Start(context.Background(), "process "+st.Template, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(attrProcess...), trace.WithAttributes(
			semconv.MessagingDestinationTemplate(st.Template), semconv.MessagingConsumerGroupName(st.Group),
			semconv.MessagingBatchMessageCount(len(msgs)),
		))
	return &Batch{t: t, span: span, stage: st}
}

// DeadLetter notes on the batch span that a message went to the
// dead-letter stream, and why.
func (b *Batch) DeadLetter(m jetstream.Msg, err error) {
	if b == nil {
		return
	}
	b.span.AddEvent("dead-lettered", trace.WithAttributes(
		semconv.MessagingMessageID(m.Headers().Get(substate.HeaderMsgID)),
		semconv.ErrorTypeKey.String(substate.ErrorCode(err)), attribute.String("substate.dead_letter.reason", substate.DeadLetterReason(err)),
	))
}

// End ends the batch span, and the spans of its events the projector did
// not end; err is the batch's failure.
func (b *Batch) End(err error) {
	if b == nil {
		return
	}
	for _, a := range b.applied {
		fail(a.span, err)
		a.span.End()
	}
	fail(b.span, err)
	b.span.End()
}

// PublishEvents starts the producer span of each canonical event mapped
// from one raw event whose trace context is parent (the raw message's
// traceparent; "" starts a new root): each becomes its event's creation
// context (Event.Hop), and the CloudEvents traceparent of an event that
// has none. A Step Functions poll's X-Ray trace header
// (DescribeExecution's traceHeader) is linked. The spans end when the
// events are stored.
func (b *Batch) PublishEvents(parent string, raw *substate.RawEvent, events []substate.Event) Spans {
	if b == nil {
		return nil
	}
	ctx := context.Background()
	if sc := Parse(parent); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	var opts []trace.SpanStartOption
	if l, ok := xrayLink(pollTraceHeader(raw)); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	out := make(Spans, len(events))
	for i := range events {
		e := &events[i]
		subject := substate.EventsSubject(e.Data.TenantID)
		_, span := b.t.tracer.Start(ctx, "publish "+TemplateEvents, append(opts, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attrPublish...), trace.WithAttributes(
				semconv.MessagingDestinationName(subject), semconv.MessagingDestinationTemplate(TemplateEvents),
				semconv.MessagingMessageID(e.ID),
			), trace.WithAttributes(eventAttrs(&e.Data)...))...)
		e.Hop = Format(span.SpanContext())
		if e.TraceParent == "" {
			e.TraceParent = e.Hop
		}
		out[i] = Span{span}
	}
	return out
}

// pollTraceHeader returns the X-Ray trace header of a Step Functions
// poll (the DescribeExecution response's traceHeader), or "".
func pollTraceHeader(raw *substate.RawEvent) string {
	if raw.Kind != substate.RawStepFunctionsPoll {
		return ""
	}
	var p struct {
		Execution struct {
			TraceHeader string `json:"traceHeader"`
		} `json:"execution"`
	}
	if json.Unmarshal(raw.Body, &p) != nil {
		return ""
	}
	return p.Execution.TraceHeader
}

// Process starts the projector's span of one event it applies: a child of
// the event's creation context (its message's traceparent header). It
// returns the span's traceparent, which the change the event makes keeps
// (Sequenced.Hop) for the change feed's publish span. Applied ends it.
func (b *Batch) Process(m jetstream.Msg, seq uint64, e *substate.Event) string {
	if b == nil {
		return ""
	}
	ctx := context.Background()
	if sc := Parse(m.Headers().Get(substate.HeaderTraceParent)); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	_, span := b.t.tracer.Start(ctx, "process "+b.stage.Template, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrProcess...), trace.WithAttributes(
			semconv.MessagingDestinationName(m.Subject()), semconv.MessagingDestinationTemplate(b.stage.Template),
			semconv.MessagingConsumerGroupName(b.stage.Group), semconv.MessagingMessageID(e.ID),
		), trace.WithAttributes(eventAttrs(&e.Data)...))
	b.applied = append(b.applied, seqSpan{seq, span})
	return Format(span.SpanContext())
}

// Applied ends the spans of the applied events, each saying whether its
// event changed the view.
func (b *Batch) Applied(res *substate.ApplyResult) {
	if b == nil {
		return
	}
	changed := make(map[uint64]bool, len(res.Changes))
	for _, c := range res.Changes {
		changed[c.Seq] = true
	}
	for _, a := range b.applied {
		a.span.SetAttributes(AttrChanged.Bool(changed[a.seq]))
		a.span.End()
	}
	b.applied = nil
}

// PublishChange starts the producer span of a change's publish on
// SUBSTATE_CHANGES, a child of the projector's span that applied its
// event (Change.Hop), else of the event's trace (Change.TraceParent), and
// makes it the message's creation context: its traceparent header. The
// span is appended to spans.
func (t *Tracer) PublishChange(spans Spans, c *substate.Change, m *nats.Msg) Spans {
	if t == nil {
		return spans
	}
	ctx := context.Background()
	sc := Parse(c.Hop)
	if !sc.IsValid() {
		sc = Parse(c.TraceParent)
	}
	if sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	_, span := t.tracer.Start(ctx, "publish "+TemplateChanges, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrPublish...), trace.WithAttributes(
			semconv.MessagingDestinationName(m.Subject), semconv.MessagingDestinationTemplate(TemplateChanges),
			semconv.MessagingMessageID(m.Header.Get(substate.HeaderMsgID)), semconv.MessagingMessageBodySize(len(m.Data)),
			AttrTenant.String(c.TenantID), AttrProvider.String(string(c.New.Provider)),
			AttrSubState.String(string(c.New.WorkflowSubState)), AttrExecution.String(c.New.WorkflowExecutionID),
		))
	m.Header.Set(substate.HeaderTraceParent, Format(span.SpanContext()))
	return append(spans, Span{span})
}
