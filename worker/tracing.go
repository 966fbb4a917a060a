package worker

import (
	"context"
	"net/url"
	"os"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/tracing"
)

// TraceFlags link what the worker shows to a trace UI. The exporter itself
// is configured by the standard OTEL_* environment variables (see
// docs/tracing.md); tracing is off without them.
type TraceFlags struct {
	TraceUIURL string `name:"trace-ui-url" placeholder:"URL" help:"URL of a trace in your trace UI, with {traceId} where the trace id goes (http://jaeger:16686/trace/{traceId}); the history route gives each event's trace link with it."`
}

// Check refuses a trace-UI URL that is not an absolute http(s) URL with
// the placeholder.
func (f TraceFlags) Check() error {
	if f.TraceUIURL == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(f.TraceUIURL, httpapi.TraceIDPlaceholder, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(f.TraceUIURL, httpapi.TraceIDPlaceholder) {
		return substate.Errorf(substate.EINVALID, "--trace-ui-url %q is not an http(s) URL with %s where the trace id goes (such as http://jaeger:16686/trace/%s)",
			f.TraceUIURL, httpapi.TraceIDPlaceholder, httpapi.TraceIDPlaceholder)
	}
	return nil
}

// openTracing sets up the trace exporter the environment configures, if
// any; the last spans are exported when the worker closes.
func (w *Worker) openTracing(ctx context.Context) error {
	if err := w.Flags.TraceFlags.Check(); err != nil {
		return err
	}
	t, err := tracing.FromEnv(ctx, w.Logger)
	if err != nil || t == nil {
		return err
	}
	w.Tracer = t
	w.closers = append(w.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), tracing.ShutdownTimeout)
		defer cancel()
		return t.Shutdown(ctx)
	})
	w.Logger.Info("tracing on", "export", tracing.Describe(os.Getenv))
	return nil
}
