package jaegertest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate/testkit/jaegertest"
)

// TestReceivesAndAnswers sends a span with a link over OTLP/HTTP and
// reads it back from the query API.
func TestReceivesAndAnswers(t *testing.T) {
	j := jaegertest.Start(t)
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPHTTP+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled})
	_, span := tp.Tracer("test").Start(ctx, "op", trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(trace.Link{SpanContext: other}))
	span.End()
	id := span.SpanContext().TraceID().String()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := j.Trace(t, id)
		if len(spans) == 1 {
			s := spans[0]
			if s.Name != "op" || s.Kind != jaegertest.KindProducer || len(s.Links) != 1 || s.Links[0].TraceID != other.TraceID().String() {
				t.Fatalf("got %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not found", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if found := j.Find(t, "unknown_service:jaegertest.test", "op"); len(found) != 1 {
		t.Errorf("Find returned %d spans, want 1", len(found))
	}
	if spans := j.Trace(t, "0123456789abcdef0123456789abcdef"); spans != nil {
		t.Errorf("an unknown trace has spans %v", spans)
	}
}
