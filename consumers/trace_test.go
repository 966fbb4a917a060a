package consumers_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/internal/tracing"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// tracedPipeline runs the normalizer, the projector and the change feed
// with one Tracer on an embedded NATS server, and returns the bus and the
// recorder of their spans.
func tracedPipeline(t *testing.T) (*bus.Bus, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.New(tp)
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, func(n *consumers.Normalizer) { n.Tracer = tr })
	view := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	view.ChangeOutbox = true
	if err := view.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })
	ctx := context.Background()
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("", 30*time.Second, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	proj := &consumers.Projector{Consumer: c, Stream: stream, Store: view, DeadLetters: pub, Linger: time.Millisecond, Tracer: tr}
	pipelinetest.RunInBackground(t, proj.Run)
	feed := &publishers.ChangeFeed{JetStream: b.JetStream, Outbox: view, Tracer: tr}
	pipelinetest.RunInBackground(t, feed.Run)
	return b, rec
}

// spanNamed returns the one ended span called name whose attribute k is v.
func spanNamed(t *testing.T, rec *tracetest.SpanRecorder, name string, k attribute.Key, v string) sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != name {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == k && kv.Value.String() == v {
				out = append(out, s)
			}
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d spans %q with %s=%s, want 1", len(out), name, k, v)
	}
	return out[0]
}

// TestTraceThroughTheStages follows one raw event with a traceparent
// through the normalizer, the projector and the change feed: one span per
// stage in the event's trace, each the child of the one before (its
// message's creation context, carried in the NATS header), batch spans
// that link to the messages, and the CloudEvents traceparent as it began.
func TestTraceThroughTheStages(t *testing.T) {
	b, rec := tracedPipeline(t)
	start := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	raw := substate.RawEvent{Kind: substate.RawEventBridge, ID: "eb-1", Body: fixtures.Provider("sfn-status-running.json"),
		Header: map[string]string{substate.HeaderTraceParent: start}}
	if err := publishers.NewJetStream(b.JetStream).PublishRaw(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "a change on the feed", func() bool { return streamCount(t, b.JetStream, substate.StreamChanges) == 1 })
	pipelinetest.WaitFor(t, "the change's span", func() bool { return len(rec.Ended()) >= 5 })

	arn := "arn:aws:states:us-east-1:123456789012:execution:order-fulfillment:ord-2024-000123"
	event := spanNamed(t, rec, "publish "+tracing.TemplateEvents, tracing.AttrSFNExecution, arn)
	if got := tracing.Format(event.Parent()); got != start {
		t.Errorf("normalizer's span: parent %s, want the raw message's context %s", got, start)
	}
	apply := spanNamed(t, rec, "process "+tracing.TemplateEvents, "substate.view.changed", "true")
	if apply.Parent().SpanID() != event.SpanContext().SpanID() {
		t.Errorf("projector's span is not the child of the event's creation context")
	}
	feed := spanNamed(t, rec, "publish "+tracing.TemplateChanges, tracing.AttrTenant, "cus_88412")
	if feed.Parent().SpanID() != apply.SpanContext().SpanID() {
		t.Errorf("change feed's span is not the child of the projector's span (the outbox keeps its context)")
	}
	for _, s := range []sdktrace.ReadOnlySpan{event, apply, feed} {
		if got, want := s.SpanContext().TraceID().String(), "4bf92f3577b34da6a3ce929d0e0e4736"; got != want {
			t.Errorf("%s: trace %s, want %s", s.Name(), got, want)
		}
	}
	normalize := spanNamed(t, rec, "process "+tracing.TemplateRaw, "messaging.consumer.group.name", bus.ConsumerNormalizer)
	if l := normalize.Links(); len(l) != 1 || tracing.Format(l[0].SpanContext) != start || normalize.Parent().IsValid() {
		t.Errorf("normalizer's batch span: parent %v, links %v; want a root linked to the raw message", normalize.Parent(), l)
	}
	project := spanNamed(t, rec, "process "+tracing.TemplateEvents, "messaging.batch.message_count", "1")
	if l := project.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != event.SpanContext().SpanID() {
		t.Errorf("projector's batch span links %v, want the event's creation context", l)
	}

	em := streamMsgs(t, b.JetStream, substate.StreamEvents)[0]
	if got, want := em.Header.Get(substate.HeaderTraceParent), tracing.Format(event.SpanContext()); got != want {
		t.Errorf("event message header traceparent = %s, want its creation context %s", got, want)
	}
	cm := streamMsgs(t, b.JetStream, substate.StreamChanges)[0]
	if got, want := cm.Header.Get(substate.HeaderTraceParent), tracing.Format(feed.SpanContext()); got != want {
		t.Errorf("change message header traceparent = %s, want its creation context %s", got, want)
	}
	for name, body := range map[string][]byte{"event": em.Data, "change": cm.Data} {
		var ce struct {
			TraceParent string `json:"traceparent"`
		}
		if err := json.Unmarshal(body, &ce); err != nil {
			t.Fatal(err)
		}
		if ce.TraceParent != start {
			t.Errorf("%s's CloudEvents traceparent = %q, want the one the trace began with, %q", name, ce.TraceParent, start)
		}
	}
}

// TestTraceLinksXRay: a Step Functions poll whose execution was started
// with an X-Ray trace header links the event's span to that trace, and
// the event, which came without a traceparent, starts a trace of its own.
func TestTraceLinksXRay(t *testing.T) {
	b, rec := tracedPipeline(t)
	body := []byte(`{"execution":{"executionArn":"arn:aws:states:us-east-1:1:execution:sm:x1","stateMachineArn":"arn:aws:states:us-east-1:1:stateMachine:sm",` +
		`"name":"x1","status":"RUNNING","startDate":1718791230.1,"input":"{\"tenantId\":\"acme\"}",` +
		`"traceHeader":"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"},"history":{"events":[]},"polledAt":"2024-06-19T10:00:30Z"}`)
	if err := publishers.NewJetStream(b.JetStream).PublishRaw(context.Background(), substate.RawEvent{Kind: substate.RawStepFunctionsPoll, ID: "poll-1", Body: body}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "a change on the feed", func() bool { return streamCount(t, b.JetStream, substate.StreamChanges) == 1 })
	event := spanNamed(t, rec, "publish "+tracing.TemplateEvents, tracing.AttrTenant, "acme")
	if l := event.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || l[0].SpanContext.SpanID().String() != "53995c3f42cd8ad8" {
		t.Errorf("links %v, want the X-Ray trace of the execution", event.Links())
	}
	if event.Parent().IsValid() {
		t.Errorf("parent %v, want a new root", event.Parent())
	}
	em := streamMsgs(t, b.JetStream, substate.StreamEvents)[0]
	e, err := substate.UnmarshalEvent(em.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.TraceParent, tracing.Format(event.SpanContext()); got != want {
		t.Errorf("CloudEvents traceparent = %q, want the new root %q", got, want)
	}
}
