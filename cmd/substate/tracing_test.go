package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/tracing"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/jaegertest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestOneIngestOneTrace: one EventBridge POST to "substate run" with the
// OTEL_* variables pointing at a real Jaeger gives one trace there that
// runs through every stage (ingest, normalize, project, change feed),
// each span the child of the one before; the batch spans of the
// normalizer and the projector link to the messages; the CloudEvents keep
// the traceparent the trace began with; and the history route links the
// event to its trace in the UI.
func TestOneIngestOneTrace(t *testing.T) {
	j := jaegertest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export within 0.1 s
	t.Setenv("OTEL_SERVICE_NAME", "substate-trace-test")
	p := startWorkerProcess(t, t.TempDir(), "--trace-ui-url", j.QueryURL+"/trace/{traceId}")
	const tenant = "acme-traced"
	workertest.IngestTenant(t, p.httpURL, tenant, "") // no traceparent: the ingest starts the trace

	var hist substate.HistoryPage
	workertest.Eventually(t, func() string {
		if code := workertest.GetJSON(t, p.httpURL+"/v1/tenants/"+tenant+"/history", &hist); code != http.StatusOK || len(hist.Transitions) == 0 {
			return "no history yet"
		}
		return ""
	})
	tr := hist.Transitions[0]
	if len(tr.TraceID) != 32 || tr.TraceURL != j.QueryURL+"/trace/"+tr.TraceID {
		t.Fatalf("history: traceId %q, traceUrl %q; want the event's trace and its link", tr.TraceID, tr.TraceURL)
	}

	chain := []string{
		"POST /v1/ingest/eventbridge",
		"publish " + tracing.TemplateRaw,
		"publish " + tracing.TemplateEvents,
		"process " + tracing.TemplateEvents,
		"publish " + tracing.TemplateChanges,
	}
	var spans map[string]jaegertest.Span
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		spans = map[string]jaegertest.Span{}
		for _, s := range j.Trace(t, tr.TraceID) {
			spans[s.Name] = s
		}
		for _, name := range chain {
			if _, ok := spans[name]; !ok {
				return "trace " + tr.TraceID + " has no span " + name + " yet"
			}
		}
		return ""
	})
	checkChain(t, spans, chain)
	checkAttributes(t, spans, tenant)
	checkBatchLinks(t, j, spans)
	checkCloudEvents(t, p.bus(t), spans)
}

// checkChain checks that the trace is one chain, each span the child of
// the one before, of the kinds the messaging conventions give.
func checkChain(t *testing.T, spans map[string]jaegertest.Span, chain []string) {
	t.Helper()
	kinds := []jaegertest.Kind{jaegertest.KindServer, jaegertest.KindProducer, jaegertest.KindProducer, jaegertest.KindConsumer, jaegertest.KindProducer}
	for i, name := range chain {
		s := spans[name]
		if s.Kind != kinds[i] || s.Service != "substate-trace-test" {
			t.Errorf("%s: kind %d of service %q, want %d of substate-trace-test", name, s.Kind, s.Service, kinds[i])
		}
		parent := ""
		if i > 0 {
			parent = spans[chain[i-1]].SpanID
		}
		if s.ParentSpanID != parent {
			t.Errorf("%s: parent %q, want %q (%s)", name, s.ParentSpanID, parent, chain[max(i-1, 0)])
		}
	}
}

// checkAttributes checks the messaging and provider attributes, and that
// no span carries the execution's input.
func checkAttributes(t *testing.T, spans map[string]jaegertest.Span, tenant string) {
	t.Helper()
	want := map[string]map[string]string{
		"publish " + tracing.TemplateRaw: {
			"messaging.system": "nats", "messaging.operation.type": "send", "messaging.destination.template": tracing.TemplateRaw,
			"messaging.destination.name": "substate.raw.stepfunctions.eventbridge", "messaging.message.id": "ev-" + tenant,
		},
		"publish " + tracing.TemplateEvents: {
			"messaging.system": "nats", "messaging.destination.template": tracing.TemplateEvents,
			"messaging.destination.name": substate.EventsSubject(tenant), "substate.tenant.id": tenant, "substate.sub_state": "failed",
		},
		"process " + tracing.TemplateEvents: {
			"messaging.system": "nats", "messaging.operation.type": "process", "messaging.consumer.group.name": bus.ProjectorConsumer(""),
			"substate.tenant.id": tenant, "substate.view.changed": "true",
		},
		"publish " + tracing.TemplateChanges: {
			"messaging.system": "nats", "messaging.destination.template": tracing.TemplateChanges, "substate.tenant.id": tenant,
		},
	}
	for name, attrs := range want {
		for k, v := range attrs {
			if got := spans[name].Attributes[k]; got != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got, v)
			}
		}
	}
	if arn := spans["publish "+tracing.TemplateEvents].Attributes["aws.step_functions.execution.arn"]; !strings.HasPrefix(arn, "arn:aws:states:") || !strings.HasSuffix(arn, "-"+tenant) {
		t.Errorf("execution ARN attribute = %q", arn)
	}
	for name, s := range spans {
		for k, v := range s.Attributes {
			if strings.Contains(v, "hunter2") || strings.Contains(v, "sk_live") {
				t.Errorf("%s: attribute %s carries the execution's input: %q", name, k, v)
			}
		}
	}
}

// checkBatchLinks checks that the normalizer's and the projector's batch
// spans, traces of their own, link to the messages of this trace.
func checkBatchLinks(t *testing.T, j *jaegertest.Server, spans map[string]jaegertest.Span) {
	t.Helper()
	for _, c := range []struct{ batch, message, group string }{
		{"process " + tracing.TemplateRaw, "publish " + tracing.TemplateRaw, bus.ConsumerNormalizer},
		{"process " + tracing.TemplateEvents, "publish " + tracing.TemplateEvents, bus.ProjectorConsumer("")},
	} {
		msg := spans[c.message]
		found := false
		for _, s := range j.Find(t, "substate-trace-test", c.batch) {
			if s.Name != c.batch || s.Attributes["messaging.batch.message_count"] == "" {
				continue // a per-message span of the same name
			}
			for _, l := range s.Links {
				if l.TraceID == msg.TraceID && l.SpanID == msg.SpanID {
					found = true
					if s.TraceID == msg.TraceID || s.ParentSpanID != "" || s.Attributes["messaging.consumer.group.name"] != c.group ||
						l.Attributes["messaging.message.id"] != msg.Attributes["messaging.message.id"] {
						t.Errorf("%s: trace %s parent %q group %q link %v; want a root of its own, of %s, linked with the message id",
							c.batch, s.TraceID, s.ParentSpanID, s.Attributes["messaging.consumer.group.name"], l, c.group)
					}
				}
			}
		}
		if !found {
			t.Errorf("no %s span links to the message's creation context (%s)", c.batch, c.message)
		}
	}
}

// checkCloudEvents checks what the messages carry: each message's NATS
// traceparent header is its creation context (the span that published
// it), and the CloudEvents traceparent of the event and of the change is
// the one the trace began with, the raw message's.
func checkCloudEvents(t *testing.T, b *bus.Bus, spans map[string]jaegertest.Span) {
	t.Helper()
	start := "00-" + spans["publish "+tracing.TemplateRaw].TraceID + "-" + spans["publish "+tracing.TemplateRaw].SpanID + "-01"
	for _, c := range []struct{ stream, span string }{
		{substate.StreamEvents, "publish " + tracing.TemplateEvents},
		{substate.StreamChanges, "publish " + tracing.TemplateChanges},
	} {
		msgs := bustest.Msgs(t, b.JetStream, c.stream)
		if len(msgs) != 1 {
			t.Fatalf("%s holds %d messages, want 1", c.stream, len(msgs))
		}
		s := spans[c.span]
		if got, want := msgs[0].Header.Get(substate.HeaderTraceParent), "00-"+s.TraceID+"-"+s.SpanID+"-01"; got != want {
			t.Errorf("%s: header traceparent %s, want its creation context %s", c.stream, got, want)
		}
		var ce struct {
			TraceParent string `json:"traceparent"`
		}
		if err := json.Unmarshal(msgs[0].Data, &ce); err != nil {
			t.Fatal(err)
		}
		if ce.TraceParent != start {
			t.Errorf("%s: CloudEvents traceparent %q, want the trace's start %q", c.stream, ce.TraceParent, start)
		}
	}
}
