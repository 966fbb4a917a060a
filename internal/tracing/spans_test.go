package tracing_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/tracing"
)

// msg is a delivered message: the headers and subject a stage reads.
type msg struct {
	jetstream.Msg // unused methods panic
	subject       string
	header        nats.Header
}

func (m msg) Headers() nats.Header { return m.header }
func (m msg) Subject() string      { return m.subject }

func newMsg(subject, id, traceParent string) msg {
	h := nats.Header{}
	h.Set(substate.HeaderMsgID, id)
	if traceParent != "" {
		h.Set(substate.HeaderTraceParent, traceParent)
	}
	return msg{subject: subject, header: h}
}

// recorder returns a Tracer whose ended spans rec holds.
func recorder(t *testing.T) (*tracing.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), rec
}

// attr returns a span's attribute, "" when it has none.
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// named returns the ended spans called name.
func named(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

const upstream = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestIngestAndRawPublish(t *testing.T) {
	tr, rec := recorder(t)
	r := httptest.NewRequest("POST", "/v1/ingest/eventbridge", nil)
	r.Header.Set("traceparent", upstream)
	r.Header.Set(substate.HeaderXRay, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	r, span := tr.Ingest(r, substate.ProviderStepFunctions)
	ev := substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-1", Body: []byte(`{}`)}
	pub := tr.PublishRaw(r.Context(), &ev)
	pub.EndStored(true, nil)
	span.EndRequest(substate.Errorf(substate.EUNAVAILABLE, "nats is away"))

	server := named(rec, "POST /v1/ingest/eventbridge")[0]
	if got, want := server.Parent().SpanID().String(), "00f067aa0ba902b7"; got != want || !server.Parent().IsRemote() {
		t.Errorf("server span's parent = %s, want the request's %s", got, want)
	}
	if got, want := server.SpanKind(), trace.SpanKindServer; got != want {
		t.Errorf("kind = %v, want %v", got, want)
	}
	if got, want := attr(server, "http.response.status_code"), "503"; got != want {
		t.Errorf("status code = %s, want %s", got, want)
	}
	if l := server.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("links = %v, want the X-Ray trace", l)
	}
	raw := named(rec, "publish "+tracing.TemplateRaw)[0]
	if raw.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("raw publish span is not the server span's child")
	}
	for k, want := range map[attribute.Key]string{
		"messaging.system": "nats", "messaging.operation.type": "send", "messaging.message.id": "eb-1",
		"messaging.destination.name": "substate.raw.stepfunctions.eventbridge", "messaging.destination.template": tracing.TemplateRaw,
		"substate.duplicate": "true",
	} {
		if got := attr(raw, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got, want := ev.Header[substate.HeaderTraceParent], tracing.Format(raw.SpanContext()); got != want {
		t.Errorf("raw event's traceparent = %q, want its publish span's %q", got, want)
	}
}

func TestNormalizerSpans(t *testing.T) {
	tr, rec := recorder(t)
	raws := []jetstream.Msg{
		newMsg("substate.raw.stepfunctions.poll", "poll-1", upstream),
		newMsg("substate.raw.stepfunctions.poll", "poll-2", ""),
	}
	b := tr.Batch(tracing.Stage{Template: tracing.TemplateRaw, Group: "substate-normalizer"}, raws)
	poll := &substate.RawEvent{Kind: substate.RawStepFunctionsPoll, ID: "poll-1",
		Body: []byte(`{"execution":{"executionArn":"arn:aws:states:eu-west-1:1:execution:sm:x","traceHeader":"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}}`)}
	events := []substate.Event{substate.NewEvent("e-1", substate.EventData{
		TenantID: "acme", Provider: substate.ProviderStepFunctions, ExecutionID: "arn:aws:states:eu-west-1:1:execution:sm:x", SubState: substate.StateRunning,
	})}
	events[0].TraceParent = upstream
	spans := b.PublishEvents(upstream, poll, events)
	orphan := []substate.Event{substate.NewEvent("e-2", substate.EventData{TenantID: "globex", Provider: substate.ProviderRestate, ExecutionID: "inv_1"})}
	spans2 := b.PublishEvents("", &substate.RawEvent{Kind: substate.RawRestate}, orphan)
	b.DeadLetter(raws[1], substate.Errorf(substate.EINVALID, "bad"))
	spans.End(nil)
	spans2.End(substate.WrapError(substate.EUNAVAILABLE, errors.New("nats: timeout"), "publish event"))
	b.End(nil)

	batch := named(rec, "process "+tracing.TemplateRaw)[0]
	if batch.Parent().IsValid() {
		t.Errorf("batch span has parent %v, want a new root", batch.Parent())
	}
	if l := batch.Links(); len(l) != 1 || tracing.Format(l[0].SpanContext) != upstream || attr2(l[0].Attributes, "messaging.message.id") != "poll-1" {
		t.Errorf("batch links = %v, want the one message with a creation context", l)
	}
	if got := attr(batch, "messaging.consumer.group.name"); got != "substate-normalizer" {
		t.Errorf("consumer group = %q", got)
	}
	if got := attr(batch, "messaging.batch.message_count"); got != "2" {
		t.Errorf("batch count = %q", got)
	}
	if ev := batch.Events(); len(ev) != 1 || ev[0].Name != "dead-lettered" {
		t.Errorf("batch events = %v, want the dead letter", ev)
	}
	pubs := named(rec, "publish "+tracing.TemplateEvents)
	if len(pubs) != 2 {
		t.Fatalf("%d event publish spans, want 2", len(pubs))
	}
	e := pubs[0]
	if tracing.Format(e.Parent()) != upstream {
		t.Errorf("event span's parent = %v, want the raw message's context", e.Parent())
	}
	if got, want := events[0].Hop, tracing.Format(e.SpanContext()); got != want {
		t.Errorf("event Hop = %q, want its span %q", got, want)
	}
	if events[0].TraceParent != upstream {
		t.Errorf("CloudEvents traceparent was rewritten to %q", events[0].TraceParent)
	}
	for k, want := range map[attribute.Key]string{
		"substate.tenant.id": "acme", "aws.step_functions.execution.arn": "arn:aws:states:eu-west-1:1:execution:sm:x",
		"messaging.message.id": "e-1", "messaging.destination.name": "substate.events.acme",
	} {
		if got := attr(e, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if l := e.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != "53995c3f42cd8ad8" {
		t.Errorf("event span links = %v, want the execution's X-Ray trace", l)
	}
	o := pubs[1]
	if o.Parent().IsValid() || orphan[0].TraceParent != orphan[0].Hop || orphan[0].Hop == "" {
		t.Errorf("an event without a trace: parent %v, traceparent %q, hop %q; want a new root that both name", o.Parent(), orphan[0].TraceParent, orphan[0].Hop)
	}
	if got := attr(o, "restate.invocation.id"); got != "inv_1" {
		t.Errorf("restate.invocation.id = %q", got)
	}
	if got, code := o.Status().Description, attr(o, "error.type"); got != "publish event" || code != substate.EUNAVAILABLE {
		t.Errorf("failed publish: status %q, error.type %q", got, code)
	}
}

func attr2(kvs []attribute.KeyValue, k attribute.Key) string {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

func TestProjectorAndFeedSpans(t *testing.T) {
	tr, rec := recorder(t)
	hop := "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	msgs := []jetstream.Msg{newMsg("substate.events.acme", "e-1", hop), newMsg("substate.events.globex", "e-2", hop)}
	b := tr.Batch(tracing.Stage{Template: tracing.TemplateEvents, Group: "substate-projector"}, msgs)
	e1 := substate.NewEvent("e-1", substate.EventData{TenantID: "acme", Provider: substate.ProviderEngine, ExecutionID: "x"})
	e2 := substate.NewEvent("e-2", substate.EventData{TenantID: "globex", Provider: substate.ProviderEngine, ExecutionID: "y"})
	h1, h2 := b.Process(msgs[0], 7, &e1), b.Process(msgs[1], 8, &e2)
	c := substate.Change{Seq: 7, TenantID: "acme", TraceParent: upstream, Hop: h1}
	b.Applied(&substate.ApplyResult{Changes: []substate.Change{c}})
	b.End(nil)

	procs := named(rec, "process "+tracing.TemplateEvents)
	if len(procs) != 3 {
		t.Fatalf("%d process spans, want one per event and the batch's", len(procs))
	}
	byHop := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range procs {
		byHop[tracing.Format(s.SpanContext())] = s
	}
	if s := byHop[h1]; attr(s, "substate.view.changed") != "true" || tracing.Format(s.Parent()) != hop {
		t.Errorf("changing event's span: changed %q parent %v", attr(s, "substate.view.changed"), s.Parent())
	}
	if s := byHop[h2]; attr(s, "substate.view.changed") != "false" {
		t.Errorf("unchanged event's span: changed %q", attr(s, "substate.view.changed"))
	}

	m := nats.NewMsg(substate.ChangeSubject(&c))
	m.Header.Set(substate.HeaderMsgID, "7")
	m.Header.Set(substate.HeaderTraceParent, upstream)
	spans := tr.PublishChange(nil, &c, m)
	spans.EndAt(0, nil)
	pub := named(rec, "publish "+tracing.TemplateChanges)[0]
	if tracing.Format(pub.Parent()) != h1 {
		t.Errorf("change publish span's parent = %v, want the projector's span %s", pub.Parent(), h1)
	}
	if got, want := m.Header.Get(substate.HeaderTraceParent), tracing.Format(pub.SpanContext()); got != want {
		t.Errorf("change message traceparent = %q, want its publish span %q", got, want)
	}
	t.Run("WithoutHop", func(t *testing.T) {
		c := substate.Change{Seq: 9, TenantID: "acme", TraceParent: upstream}
		tr.PublishChange(nil, &c, nats.NewMsg("substate.changes.running.engine.acme")).End(nil)
		spans := named(rec, "publish "+tracing.TemplateChanges)
		if got := tracing.Format(spans[len(spans)-1].Parent()); got != upstream {
			t.Errorf("parent = %q, want the change's trace %q", got, upstream)
		}
	})
}

func TestBatchLinksEveryMessage(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithRawSpanLimits(tracing.SpanLimits(func(string) string { return "" })))
	msgs := make([]jetstream.Msg, 600)
	for i := range msgs {
		msgs[i] = newMsg("substate.events.acme", "e", upstream)
	}
	tracing.New(tp).Batch(tracing.Stage{Template: tracing.TemplateEvents}, msgs).End(nil)
	if got := len(rec.Ended()[0].Links()); got != len(msgs) {
		t.Errorf("%d links, want one for each of the %d messages", got, len(msgs))
	}
}

// TestOffCostsNothing holds the promise of tracing off: a nil Tracer's
// calls allocate nothing and change nothing.
func TestOffCostsNothing(t *testing.T) {
	var tr *tracing.Tracer
	r := httptest.NewRequest("POST", "/v1/ingest/eventbridge", nil)
	r.Header.Set("traceparent", upstream)
	ev := substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-1"}
	msgs := []jetstream.Msg{newMsg("substate.events.acme", "e-1", upstream)}
	events := []substate.Event{substate.NewEvent("e-1", substate.EventData{TenantID: "acme"})}
	change := substate.Change{Seq: 1, TenantID: "acme"}
	m := nats.NewMsg("substate.changes.running.engine.acme")
	res := substate.ApplyResult{}
	allocs := testing.AllocsPerRun(100, func() {
		r2, s := tr.Ingest(r, substate.ProviderStepFunctions)
		tr.PublishRaw(r2.Context(), &ev).EndStored(false, nil)
		s.EndRequest(nil)
		b := tr.Batch(tracing.Stage{}, msgs)
		b.PublishEvents(upstream, &ev, events).End(nil)
		_ = b.Process(msgs[0], 1, &events[0])
		b.DeadLetter(msgs[0], nil)
		b.Applied(&res)
		b.End(nil)
		var spans tracing.Spans
		spans = tr.PublishChange(spans, &change, m)
		spans.EndAt(0, nil)
		spans.End(nil)
	})
	if allocs != 0 {
		t.Errorf("tracing off allocates %v times a round, want 0", allocs)
	}
	if ev.Header != nil || events[0].Hop != "" || m.Header.Get(substate.HeaderTraceParent) != "" {
		t.Errorf("tracing off changed a message: raw header %v, hop %q, change header %v", ev.Header, events[0].Hop, m.Header)
	}
}
