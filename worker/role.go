package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/internal/netx"
	"github.com/substatehq/substate/publishers"
)

// Roles a worker process can take.
const (
	// RoleAll runs everything in one process: the single-binary default.
	RoleAll = "all"
	// RoleIngest runs the HTTP ingress, the normalizer and the EventBridge
	// forwarder. It keeps no state and scales out freely: every normalizer
	// shares one durable consumer.
	RoleIngest = "ingest"
	// RoleProject runs the projector, its view, the query API and the
	// pollers. Each replica keeps a full view and its own durable
	// consumer, named from --instance.
	RoleProject = "project"
	// RoleEngine runs the built-in workflow engine alone. Its executions
	// live in <data-dir>/engine.db and belong to the process that started
	// them, so a cluster runs exactly one, on a persistent data dir.
	RoleEngine = "engine"
)

// RoleFlags choose what one worker process runs, so that a deployment can
// scale ingestion and queries separately.
type RoleFlags struct {
	Role       string `enum:"all,ingest,project,engine" default:"all" help:"What this process runs: all; ingest (HTTP ingress, normalizer, EventBridge forwarder; stateless); project (projector, view, query API and pollers, one durable consumer per --instance); engine (the built-in workflow engine; run exactly one, on a persistent --data-dir)."`
	ChangeFeed bool   `default:"true" negatable:"" help:"Publish real view changes to the stream SUBSTATE_CHANGES on substate.changes.<subState>.<provider>.<tenant>, through an outbox in the view (at least once, deduplicated by the change's sequence). Every projector replica publishes the same change with the same message id, which the stream stores once."`
}

// ingests reports whether the role runs the ingress and the normalizer.
func (f RoleFlags) ingests() bool { return f.runs(RoleIngest) }

// projects reports whether the role runs the projector and its view.
func (f RoleFlags) projects() bool { return f.runs(RoleProject) }

// runsEngine reports whether the role runs the built-in workflow engine.
func (f RoleFlags) runsEngine() bool { return f.runs(RoleEngine) }

// runs reports whether the role includes part; no role is RoleAll.
func (f RoleFlags) runs(part string) bool {
	return f.Role == part || f.Role == RoleAll || f.Role == ""
}

// openSteps returns the steps that open what the worker's role runs, in
// the order Open takes them. Steps that declare durable consumers retry:
// a NATS cluster may still be electing leaders at start-up.
func (w *Worker) openSteps() []func(context.Context) error {
	steps := []func(context.Context) error{w.openBus}
	if w.Flags.projects() {
		steps = append(steps, w.openView)
	}
	if w.Flags.ingests() {
		steps = append(steps, w.openMapper, w.retrying(w.openNormalizer), w.retrying(w.openForwarder))
	}
	if w.Flags.runsEngine() {
		steps = append(steps, w.openEngine)
	}
	if w.Flags.projects() {
		// The reconciler reads the view for stale runs; with several
		// projector replicas, enable its pollers on one of them.
		steps = append(steps, w.retrying(w.openProjector), w.openChangeFeed, w.openReconciler)
	}
	return append(steps, w.openHTTP, w.openMetricsHTTP, w.openSchemaBase)
}

// actors returns what Run runs: the role's consumers and the lag watch.
func (w *Worker) actors() []func(context.Context) error {
	var out []func(context.Context) error
	if w.Normalizer != nil {
		out = append(out, w.Normalizer.Run, w.watchBacklog)
	}
	if w.forwarder != nil {
		out = append(out, w.forwarder.Run)
	}
	if w.Projector != nil {
		out = append(out, w.Projector.Run, w.runReconcile, w.watchStream)
		if w.Flags.EvidenceCheckInterval > 0 {
			out = append(out, w.checkEvidence)
		}
	}
	if w.Flags.APIKeysFile != "" {
		out = append(out, w.watchKeys)
	}
	if w.Flags.SLOFile != "" && w.View != nil {
		out = append(out, w.watchSLOs)
	}
	if w.Changes != nil {
		out = append(out, w.Changes.Run)
	}
	return append(out, w.watchLag, w.watchBus, w.watchStore, w.watchNATS)
}

// pullConsumers returns the durable consumers the role reads.
func (w *Worker) pullConsumers() []jetstream.Consumer {
	var out []jetstream.Consumer
	if w.Normalizer != nil {
		out = append(out, w.Normalizer.Consumer)
	}
	if w.Projector != nil {
		out = append(out, w.Projector.Consumer)
	}
	if w.forwarder != nil {
		out = append(out, w.forwarder.Consumer)
	}
	return out
}

// durable names a durable consumer on its stream.
type durable struct{ stream, consumer string }

// durables returns the durable consumers the role needs in place to be
// ready.
func (w *Worker) durables() []durable {
	var out []durable
	if w.Flags.ingests() {
		out = append(out, durable{substate.StreamRaw, bus.ConsumerNormalizer})
	}
	if w.Flags.projects() {
		out = append(out, durable{substate.StreamEvents, bus.ProjectorConsumer(w.Flags.Instance)})
	}
	return out
}

// ingester returns the ingress, or nil when the role does not ingest (the
// server then answers 404 under /v1/ingest/). A malformed webhook secret
// is an error whatever the role.
func (w *Worker) ingester() (httpapi.Ingester, error) {
	pub := publishers.NewJetStream(w.Bus.JetStream)
	in := &ingress.Ingress{
		Store: pub, DeadLetters: pub, APIKey: w.Flags.IngestAPIKey, Exposed: !netx.Loopback(w.Flags.HTTPAddr),
		Ready: w.natsReady, Metrics: w.Metrics.Ingress, Tracer: w.Tracer, Logger: w.Logger.With("component", "ingress"),
		Admission: &ingress.Admission{
			MaxBacklog: w.Flags.IngestMaxBacklog, Backlog: w.backlog.Load, MaxInFlight: w.Flags.IngestMaxInFlight,
			RetryAfter: 5 * time.Second,
		},
	}
	if s := w.Flags.RestateWebhookSecret; s != "" {
		v, err := ingress.NewWebhookVerifier(s)
		if err != nil {
			return nil, err
		}
		in.Webhook = v
	}
	if !w.Flags.ingests() {
		return nil, nil
	}
	if in.Exposed && in.APIKey == "" {
		w.Logger.Warn("POST /v1/ingest/eventbridge refuses every request: set --ingest-api-key to open it")
	}
	if in.Exposed && in.Webhook == nil {
		w.Logger.Warn("POST /v1/ingest/restate refuses every request: set --restate-webhook-secret to open it")
	}
	return in, nil
}

// checkDurable reports whether a durable consumer the role reads is in
// place and, for the projector, whether the view has caught up with
// SUBSTATE_EVENTS once since the worker started: a replica that rebuilds
// its view stays out of the query Service until it has.
func (w *Worker) checkDurable(ctx context.Context, d durable) error {
	c, err := w.Bus.JetStream.Consumer(ctx, d.stream, d.consumer)
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", d.consumer, d.stream, err)
	}
	if d.stream != substate.StreamEvents || w.caughtUp.Load() {
		return nil
	}
	if n := c.CachedInfo().NumPending; n > uint64(max(w.Flags.BatchSize, 1)) {
		return fmt.Errorf("view catching up: %d events behind", n)
	}
	w.caughtUp.Store(true)
	return nil
}
