package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// Destination templates, as the channels of contract/asyncapi.json name
// the subjects: the {destination} of the span names.
const (
	TemplateRaw     = "substate.raw.{provider}.{source}"
	TemplateEvents  = "substate.events.{tenant}"
	TemplateChanges = "substate.changes.{subState}.{provider}.{tenant}"
)

// Attributes substate adds to the conventions' own. Tenant ids are span
// attributes, never metric labels.
const (
	AttrTenant    = attribute.Key("substate.tenant.id")
	AttrProvider  = attribute.Key("substate.provider")
	AttrSubState  = attribute.Key("substate.sub_state")
	AttrExecution = attribute.Key("substate.execution.id")
	AttrWorkflow  = attribute.Key("substate.workflow")
	AttrDuplicate = attribute.Key("substate.duplicate")
	AttrChanged   = attribute.Key("substate.view.changed")
	// AttrRestateInvocation is the Restate invocation id, verbatim (inv_…),
	// as Restate's own spans carry it.
	AttrRestateInvocation = attribute.Key("restate.invocation.id")
	// AttrSFNExecution is the Step Functions execution ARN, beside the
	// conventions' aws.step_functions.* attributes.
	AttrSFNExecution = attribute.Key("aws.step_functions.execution.arn")
	// AttrXRayHeader is the X-Ray trace header a link was read from.
	AttrXRayHeader = attribute.Key("aws.xray.trace_header")
)

var (
	attrNATS    = semconv.MessagingSystemKey.String("nats")
	attrPublish = []attribute.KeyValue{attrNATS, semconv.MessagingOperationName("publish"), semconv.MessagingOperationTypeSend}
	attrProcess = []attribute.KeyValue{attrNATS, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess}
)

// Span is one span, or nothing when tracing is off.
type Span struct{ s trace.Span }

// End ends the span; a non-nil err marks it failed, with the error's
// substate code as error.type.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	fail(s.s, err)
	s.s.End()
}

// Context returns the span's traceparent, "" when tracing is off.
func (s Span) Context() string {
	if s.s == nil {
		return ""
	}
	return Format(s.s.SpanContext())
}

// fail marks a span failed with err, when err is not nil.
func fail(s trace.Span, err error) {
	if err == nil {
		return
	}
	s.SetAttributes(semconv.ErrorTypeKey.String(substate.ErrorCode(err)))
	s.SetStatus(codes.Error, substate.ErrorMessage(err))
}

// Spans are the spans of several messages, ended together or one by one;
// nil when tracing is off.
type Spans []Span

// End ends every span not ended yet (ending one twice does nothing).
func (ss Spans) End(err error) {
	for _, s := range ss {
		s.End(err)
	}
}

// EndAt ends the i-th span.
func (ss Spans) EndAt(i int, err error) {
	if i < len(ss) {
		ss[i].End(err)
	}
}

// Ingest starts the server span of an ingest request: a child of the
// request's traceparent, or a new root, linked to the X-Ray trace its
// X-Amzn-Trace-Id header names, if any. It returns the request carrying
// the span, for the publish spans of its raw events.
func (t *Tracer) Ingest(r *http.Request, p substate.Provider) (*http.Request, Span) {
	if t == nil {
		return r, Span{}
	}
	ctx := r.Context()
	if sc := Parse(r.Header.Get(substate.HeaderTraceParent)); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(r.URL.Path), semconv.URLPath(r.URL.Path),
		AttrProvider.String(string(p)),
	)}
	if l, ok := xrayLink(r.Header.Get(substate.HeaderXRay)); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	ctx, span := t.tracer.Start(ctx, r.Method+" "+r.URL.Path, opts...)
	return r.WithContext(ctx), Span{span}
}

// EndRequest ends an ingest request's span with the status it was
// answered with: 202, or the status of err's code. A 5xx marks it failed;
// a refusal (4xx) is the client's and only gets error.type.
func (s Span) EndRequest(err error) {
	if s.s == nil {
		return
	}
	status := http.StatusAccepted
	if err != nil {
		status = httpx.Status(substate.ErrorCode(err))
		s.s.SetAttributes(semconv.ErrorTypeKey.String(substate.ErrorCode(err)))
	}
	s.s.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		s.s.SetStatus(codes.Error, substate.ErrorMessage(err))
	}
	s.s.End()
}

// xrayLink is the link to the X-Ray trace a trace header names.
func xrayLink(h string) (trace.Link, bool) {
	if h == "" {
		return trace.Link{}, false
	}
	sc := XRay(h)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrXRayHeader.String(h)}}, true
}

// PublishRaw starts the producer span of a raw event's publish on
// SUBSTATE_RAW, a child of ctx's span, and makes it the raw message's
// creation context: its traceparent header. End it with EndStored.
func (t *Tracer) PublishRaw(ctx context.Context, ev *substate.RawEvent) Span {
	if t == nil {
		return Span{}
	}
	subject := substate.RawSubject(ev.Kind)
	_, span := t.tracer.Start(ctx, "publish "+TemplateRaw, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrPublish...), trace.WithAttributes(
			semconv.MessagingDestinationName(subject), semconv.MessagingDestinationTemplate(TemplateRaw),
			semconv.MessagingMessageID(ev.ID), semconv.MessagingMessageBodySize(len(ev.Body)),
			AttrProvider.String(string(ev.Kind.Provider())),
		))
	if ev.Header == nil {
		ev.Header = map[string]string{}
	}
	ev.Header[substate.HeaderTraceParent] = Format(span.SpanContext())
	return Span{span}
}

// EndStored ends a raw publish span, saying whether JetStream held the id
// already (a redelivery, stored once).
func (s Span) EndStored(duplicate bool, err error) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(AttrDuplicate.Bool(duplicate))
	s.End(err)
}

// eventAttrs are the attributes of a canonical event: its tenant, where
// it comes from and the provider's own ids.
func eventAttrs(d *substate.EventData) []attribute.KeyValue {
	out := []attribute.KeyValue{
		AttrTenant.String(d.TenantID), AttrProvider.String(string(d.Provider)), AttrSubState.String(string(d.SubState)),
		AttrExecution.String(d.ExecutionID), AttrWorkflow.String(d.Workflow),
	}
	switch d.Provider {
	case substate.ProviderRestate:
		out = append(out, AttrRestateInvocation.String(d.ExecutionID))
	case substate.ProviderStepFunctions:
		out = append(out, AttrSFNExecution.String(d.ExecutionID))
	}
	return out
}
