// Package tracing makes the OpenTelemetry spans of substate's pipeline
// (ingest, normalize, project, change feed) and sets up their exporter
// from the standard OTEL_* environment variables.
//
// Tracing is off unless the environment asks for it (FromEnv), and a nil
// *Tracer is tracing off: every method of it, and of the values it
// returns, does nothing and allocates nothing, so a stage calls it
// unconditionally and pays one nil check per batch or message.
//
// The spans follow the OpenTelemetry messaging conventions: the name is
// the operation and the destination template (publish
// substate.raw.{provider}.{source}), a batch's process span links to the
// creation context of each of its messages rather than parent it, and a
// message's creation context travels in its NATS header traceparent (one
// span per message and stage is its child, so one ingest request makes
// one trace through every stage). The CloudEvents traceparent attribute
// is left as the trace began. docs/tracing.md lists the spans and their
// attributes.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate"
)

// ScopeName is the instrumentation scope of substate's spans.
const ScopeName = "github.com/substatehq/substate"

// DefaultServiceName is the service.name of the spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const DefaultServiceName = "substate"

// Tracer makes the spans of substate's stages. The nil Tracer is tracing
// off.
type Tracer struct {
	tracer   trace.Tracer
	shutdown func(context.Context) error
}

// New returns a Tracer that makes its spans with tp (a test passes an SDK
// provider with an in-memory recorder).
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds the wait.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Environment variables FromEnv reads itself; the exporter, the sampler
// and the batch processor read the other OTEL_* variables (endpoint,
// headers, TLS, timeout, compression, OTEL_TRACES_SAMPLER, OTEL_BSP_*).
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envLinkLimit      = "OTEL_SPAN_LINK_COUNT_LIMIT"
)

// MaxLinks is the links a span may have unless OTEL_SPAN_LINK_COUNT_LIMIT
// says otherwise: a batch's process span links to each of its messages,
// and a batch holds up to --batch-size (512) of them, where the SDK's own
// default keeps 128.
const MaxLinks = 4096

// FromEnv returns the Tracer the environment configures, or nil (tracing
// off). Tracing is on when OTEL_TRACES_EXPORTER is otlp, or when it is
// unset and an OTLP endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turns it off. The protocol is http/protobuf
// unless OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says grpc. An exporter or
// protocol substate does not speak is an EINVALID error, not a silent off.
func FromEnv(ctx context.Context, logger *slog.Logger) (*Tracer, error) {
	on, err := enabled(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := newExporter(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithAttributes(serviceVersion()...),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, substate.WrapError(substate.EINVALID, err, "OTEL_RESOURCE_ATTRIBUTES")
	}
	if logger != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("trace export failed", "err", err)
		}))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(SpanLimits(os.Getenv)))
	return &Tracer{tracer: tp.Tracer(ScopeName), shutdown: tp.Shutdown}, nil
}

// SpanLimits are the SDK's limits from OTEL_SPAN_*_LIMIT, with MaxLinks
// links a span unless OTEL_SPAN_LINK_COUNT_LIMIT is set.
func SpanLimits(getenv func(string) string) sdktrace.SpanLimits {
	limits := sdktrace.NewSpanLimits()
	if getenv(envLinkLimit) == "" {
		limits.LinkCountLimit = MaxLinks
	}
	return limits
}

// enabled reports whether the environment turns tracing on.
func enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv(envExporter)); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return getenv(envEndpoint) != "" || getenv(envTracesEndpoint) != "", nil
	default:
		return false, substate.Errorf(substate.EINVALID, "%s=%s: substate exports traces over OTLP only (set otlp, or none to turn tracing off)", envExporter, exp)
	}
}

// newExporter returns the OTLP exporter of the protocol the environment
// names; it reads its own settings from the environment.
func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto := cmp.Or(strings.TrimSpace(getenv(envTracesProtocol)), strings.TrimSpace(getenv(envProtocol)), "http/protobuf")
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, substate.Errorf(substate.EINVALID, "OTLP protocol %q: substate speaks http/protobuf and grpc", proto)
	}
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "otlp trace exporter (%s)", proto)
	}
	return exp, nil
}

// serviceVersion is the service.version attribute: the module version
// the binary was built from, when it has one.
func serviceVersion() []attribute.KeyValue {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return nil
	}
	return []attribute.KeyValue{attribute.String("service.version", info.Main.Version)}
}

// ShutdownTimeout bounds the export of the last spans when the worker
// stops.
const ShutdownTimeout = 5 * time.Second

// Describe says in one line how tracing is configured, for the worker's
// start-up log: the protocol and the endpoint, without any credentials
// its URL holds.
func Describe(getenv func(string) string) string {
	endpoint := cmp.Or(getenv(envTracesEndpoint), getenv(envEndpoint))
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		endpoint = u.Scheme + "://" + u.Host + u.Path
	} else {
		endpoint = "the exporter's default endpoint"
	}
	proto := cmp.Or(getenv(envTracesProtocol), getenv(envProtocol), "http/protobuf")
	return fmt.Sprintf("OTLP %s to %s", proto, endpoint)
}
