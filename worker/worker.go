package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/netx"
	"github.com/substatehq/substate/internal/ratelog"
	"github.com/substatehq/substate/internal/tracing"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/redact"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
)

// Flags configure the worker; run, demo and bench share them.
type Flags struct {
	DataDir              string        `default:"./data" help:"Where the view (view.db), the engine's executions (engine.db) and the embedded NATS store (nats/) live."`
	HTTPAddr             string        `name:"http-addr" default:"127.0.0.1:8080" help:"HTTP listen address of ingress, queries, health and metrics."`
	HTTPMaxConns         int           `name:"http-max-conns" default:"4096" help:"HTTP connections open at once; one more is answered 503 at once (lowered to fit the open-file limit; -1 for no cap)."`
	HTTPMaxConnsPerIP    int           `name:"http-max-conns-per-client" default:"256" help:"HTTP connections one client address (an IPv4 address, an IPv6 /64) may hold at once; above it, and above --http-max-conns, a connection is served /healthz and /readyz only, and anything else 503 at once. Raise it (or -1 for no cap) behind a proxy or load balancer that connects from few addresses."`
	HTTPAllowedHosts     []string      `name:"http-allowed-hosts" placeholder:"NAME" help:"Host names HTTP requests may be addressed to besides localhost and the loopback addresses, comma-separated (a local proxy's public name). On a loopback --http-addr any other Host is refused with 403, so a web page that resolves its own name to this machine (DNS rebinding) cannot use the worker; beyond loopback Host is checked only when this is set."`
	IngestAPIKey         string        `help:"X-Api-Key that EventBridge deliveries must carry."`
	RestateWebhookSecret string        `help:"Standard Webhooks secret (whsec_…) that signs Restate deliveries."`
	TenantRule           []string      `sep:"none" help:"Tenant resolution rule, repeatable, tried in order: input:<JSONPath on the execution input>, name:<regexp with a (?P<tenant>…) group on the execution name>, restate:key, engine:tenant. Default: input:$.tenantId, restate:key, engine:tenant." placeholder:"RULE"`
	Instance             string        `help:"Name of this projector replica; each replica keeps its own view and durable consumer."`
	BatchSize            int           `default:"512" help:"Messages per normalizer and projector batch."`
	BatchLinger          time.Duration `default:"2ms" help:"How long a normalizer or projector batch waits for more messages after its first, unless it fills first. With --batch-linger-max above it, a batch of fewer than 64 messages goes on while messages keep coming within this of each other."`
	BatchLingerMax       time.Duration `default:"2ms" help:"The longest a normalizer or projector batch of fewer than 64 messages waits after its first while more keep coming (at least --batch-linger; the default waits no longer than it). Longer (20ms) makes larger batches at steady moderate rates, sharing a view commit, its fsyncs and acknowledgements among more events, at up to this much more per stage; it costs throughput when the pipeline is saturated."`
	MaxDeliveries        int           `default:"10" help:"Deliveries of a message that keeps failing before it is dead-lettered."`
	AckWait              time.Duration `default:"30s" help:"How long a delivered message may stay unacknowledged before JetStream redelivers it (after a crash, what the dead process held comes back after this)."`
	ReadAPIFlags         `embed:""`
	IngestMaxBacklog     uint64        `default:"100000" help:"Raw events waiting for the normalizer (SUBSTATE_RAW backlog) at which ingest answers 429 with Retry-After until it drains (0 = no bound)."`
	IngestMaxInFlight    int64         `default:"4096" help:"Events whose publish ingest may await at once before it answers 429 with Retry-After (0 = no bound)."`
	OnStreamLoss         string        `enum:"rebuild,refuse" default:"rebuild" help:"What to do when SUBSTATE_EVENTS no longer holds what the view was built from (deleted, created again, truncated): rebuild (move the view aside and refill it from what the stream holds) or refuse (exit non-zero naming the rebuild command)."`
	StreamCheckEvery     time.Duration `hidden:"" default:"5s" help:"How often the running worker compares the view with SUBSTATE_EVENTS."`
	ViewFailureTimeout   time.Duration `default:"2m" help:"How long the projector may fail to write the view (a corrupt page, a full disk) without one success before /healthz answers 503, so that a liveness probe restarts the worker (0 = never)."`
	ForwardFlags         `embed:""`
	ContractFlags        `embed:""`
	RoleFlags            `embed:""`
	LogFlags             `embed:""`
	TraceFlags           `embed:""`
	ConsoleFlags         `embed:""`
	NATSFlags            `embed:""`
	StreamFlags          `embed:""`
	ReconcileFlags       `embed:""`
	ActionFlags          `embed:""`
	DeadlineFlags        `embed:""`
}

// Worker is a running substate worker: NATS (embedded or not), the streams,
// the view, the normalizer, the projector and the HTTP server.
type Worker struct {
	Flags   Flags
	Logger  *slog.Logger
	Bus     *bus.Bus
	View    *state.DB
	HTTP    *httpapi.Server
	Metrics *consumers.Metrics
	Mapper  *mapping.Mapper
	Engine  *engine.Engine
	// Keys are the read API's keys and Auth checks them on every read
	// route; Redaction hides the providers' input and output from callers
	// who are not admin.
	Keys        *httpapi.Keys
	Auth        *httpapi.Authorizer
	Redaction   *redact.Policy
	MetricsHTTP *httpapi.Server // on --metrics-addr; nil without it
	// Tracer makes the pipeline's spans; nil when tracing is off (no
	// OTEL_* exporter configured).
	Tracer *tracing.Tracer

	// The pipeline's stages, each nil when the role does not run it: the
	// normalizer, the projector and the change feed that drains the
	// view's outbox (nil with --no-change-feed).
	Normalizer *consumers.Normalizer
	Projector  *consumers.Projector
	Changes    *publishers.ChangeFeed

	evidence *replay.CheckMetrics // what the evidence check found
	slos     *substate.SLOs       // from --slo-file; nil without one

	registry  *prometheus.Registry
	forwarder *consumers.Forwarder  // nil without --eventbridge-bus
	caughtUp  atomic.Bool           // the view has caught up once; see checkDurable
	streamErr atomic.Pointer[error] // the stream loss watchStream found
	natsStall atomic.Pointer[error] // NATS did not answer the last ping, see watchNATS
	backlog   atomic.Uint64         // SUBSTATE_RAW's unprocessed backlog, see watchBacklog
	gapFirst  atomic.Uint64         // the first sequence of the last gap watchStream reported
	reconcile reconcile
	jobs      substate.JobService // fleet jobs; nil without a view
	closers   []func() error
}

// New returns a worker for the flags; Open starts it.
func New(f Flags) *Worker {
	return &Worker{Flags: f, Logger: f.Logger(), registry: prometheus.NewRegistry()}
}

// Open starts NATS, declares the streams and consumers, opens the view and
// starts serving HTTP. On error everything opened so far is closed.
func (w *Worker) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Close())
		}
	}()
	if err := w.Flags.CheckExposure(); err != nil {
		return err
	}
	if err := w.Flags.CheckBatches(); err != nil {
		return err
	}
	if err := w.openReadAPI(); err != nil {
		return err
	}
	if err := w.openTracing(ctx); err != nil {
		return err
	}
	if err := w.openSLOs(); err != nil {
		return err
	}
	if err := os.MkdirAll(w.Flags.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	w.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w.Metrics = consumers.NewMetrics(w.registry)
	w.evidence = replay.NewCheckMetrics(w.registry)
	for _, step := range w.openSteps() {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// MaxBatchLinger bounds --batch-linger: a batch that waits longer holds
// each event of a quiet tenant back for as long in each stage.
const MaxBatchLinger = time.Second

// CheckBatches refuses a batch size below one, a batch linger outside
// (0, MaxBatchLinger], and a longest linger below the linger or above
// MaxBatchLinger.
func (f Flags) CheckBatches() error {
	switch {
	case f.BatchSize < 1:
		return substate.Errorf(substate.EINVALID, "--batch-size must be at least 1, not %d", f.BatchSize)
	case f.BatchLinger <= 0 || f.BatchLinger > MaxBatchLinger:
		return substate.Errorf(substate.EINVALID, "--batch-linger must be above 0 and at most %s, not %s", MaxBatchLinger, f.BatchLinger)
	case f.BatchLingerMax < f.BatchLinger || f.BatchLingerMax > MaxBatchLinger:
		return substate.Errorf(substate.EINVALID, "--batch-linger-max must be at least --batch-linger (%s) and at most %s, not %s", f.BatchLinger, MaxBatchLinger, f.BatchLingerMax)
	}
	return nil
}

// CheckExposure refuses to serve HTTP on a non-loopback address without
// ingest credentials (anyone on the network could write tenant statuses)
// or without read-API keys (anyone could read every tenant and /metrics),
// naming every flag missing at once.
func (f Flags) CheckExposure() error {
	if netx.Loopback(f.HTTPAddr) {
		return nil
	}
	var missing []string
	if f.ingests() && f.IngestAPIKey == "" && f.RestateWebhookSecret == "" {
		missing = append(missing, "ingest credentials (set --ingest-api-key and/or --restate-webhook-secret)")
	}
	if f.servesReads() && f.APIKeysFile == "" && strings.TrimSpace(f.APIKeys) == "" {
		missing = append(missing, "read-API keys (set --api-keys-file or --api-keys; see docs/security.md)")
	}
	if len(missing) == 0 {
		return nil
	}
	return substate.Errorf(substate.EINVALID, "refusing to serve HTTP on non-loopback address %s without %s", f.HTTPAddr, strings.Join(missing, " and "))
}

func (w *Worker) openBus(context.Context) error {
	f := w.Flags
	b, err := bus.Open(f.BusConfig(w.Logger))
	if err != nil {
		return err
	}
	w.Bus = b
	w.closers = append(w.closers, b.Close)
	if creds, ok := b.Credentials(); ok {
		w.Logger.Info("embedded nats server running", "url", b.ClientURL(), "store", filepath.Join(f.DataDir, "nats"))
		w.Logger.Info("nats credentials for other programs", creds.Hint()...)
	}
	return retry(30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return w.Flags.Topology().EnsureStreams(ctx, b.JetStream)
	}, w.Logger)
}

// retrying wraps a start-up step that declares consumers with retry.
func (w *Worker) retrying(step func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		return retry(30*time.Second, func() error { return step(ctx) }, w.Logger)
	}
}

// retry calls fn until it succeeds or limit passes: at start-up a NATS
// cluster may still be electing leaders or placing streams. A stream loss
// the worker refuses to start on is no reason to wait.
func retry(limit time.Duration, fn func() error, log *slog.Logger) error {
	deadline := time.Now().Add(limit)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 4*time.Second) {
		err := fn()
		var loss *streamLoss
		if err == nil || errors.As(err, &loss) || time.Now().Add(wait).After(deadline) {
			return err
		}
		log.Warn("nats not ready, retrying", "err", err, "in", wait)
		time.Sleep(wait)
	}
}

func (w *Worker) openView(context.Context) error {
	w.View = state.NewDB(filepath.Join(w.Flags.DataDir, ViewFile(w.Flags.Instance)))
	w.View.Logger = w.Logger.With("component", "projector") // logs each committed change
	w.View.MoveCorrupt = true                               // a corrupt file is moved aside and refilled, see docs/view.md
	w.View.ChangeOutbox = w.Flags.ChangeFeed                // see openChangeFeed
	if err := w.View.Open(); err != nil {
		return fmt.Errorf("open view: %w", err)
	}
	w.closers = append(w.closers, w.View.Close)
	w.registry.MustRegister(&consumers.TenantsCollector{Counts: w.View.TenantCounts})
	w.useSLOs()
	return nil
}

// ViewFile is view.db, or view-<instance>.db for a named replica sharing a
// data directory with others.
func ViewFile(instance string) string {
	if instance == "" {
		return "view.db"
	}
	return "view-" + substate.EncodeToken(instance) + ".db"
}

func (w *Worker) openMapper(context.Context) error {
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		return err
	}
	unknown := w.Metrics.UnknownStates
	w.Mapper = mapping.New(mapping.Config{Tenants: rules, Logger: w.Logger, OnUnknown: func(p string) {
		unknown.WithLabelValues(p).Inc()
	}})
	return nil
}

func (w *Worker) openNormalizer(ctx context.Context) error {
	cfg := bus.ConsumerConfig(bus.ConsumerNormalizer, w.Flags.AckWait, w.Flags.NATSReplicas)
	c, err := bus.EnsureConsumer(ctx, w.Bus.JetStream, substate.StreamRaw, cfg)
	if err != nil {
		return err
	}
	if err := w.Flags.Topology().EnsureUnresolvedStream(ctx, w.Bus.JetStream); err != nil {
		return err
	}
	pub := publishers.NewJetStream(w.Bus.JetStream)
	w.Normalizer = &consumers.Normalizer{
		Consumer: c, Mapper: w.Mapper, EventID: mapping.EventID, Events: pub, DeadLetters: pub,
		Unresolved: &publishers.Unresolved{JS: w.Bus.JetStream}, Retry: consumers.Retry{MaxDeliveries: w.Flags.MaxDeliveries},
		BatchSize: w.Flags.BatchSize, Linger: w.Flags.BatchLinger, LingerMax: w.Flags.BatchLingerMax, Metrics: w.Metrics, Tracer: w.Tracer, Logger: w.Logger.With("component", "normalizer"),
	}
	return nil
}

func (w *Worker) openProjector(ctx context.Context) error {
	if err := w.checkStream(ctx); err != nil {
		return err
	}
	cp, err := w.View.Checkpoint(ctx)
	if err != nil {
		return err
	}
	cfg := bus.ProjectorConsumerConfig(w.Flags.Instance, w.Flags.AckWait, w.Flags.NATSReplicas)
	c, err := bus.ConsumerFrom(ctx, w.Bus.JetStream, substate.StreamEvents, cfg, cp)
	if err != nil {
		return err
	}
	stream, err := w.Bus.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return err
	}
	raw, err := w.Bus.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		return err
	}
	w.Projector = &consumers.Projector{
		Consumer: c, Stream: stream, Store: w.View,
		// A deadline waits for the normalizer, in this process or another.
		Normalized:  &consumers.Normalized{Raw: raw, Consumer: bus.ConsumerNormalizer},
		DeadLetters: publishers.NewJetStream(w.Bus.JetStream), BatchSize: w.Flags.BatchSize, Linger: w.Flags.BatchLinger, LingerMax: w.Flags.BatchLingerMax,
		Metrics: w.Metrics, Tracer: w.Tracer, Logger: w.Logger.With("component", "projector"),
	}
	if cp == 0 { // an empty view fills from what the stream holds: history
		w.Projector.HistoryUpTo = stream.CachedInfo().State.LastSeq
	}
	return nil
}

// openEngine opens the built-in workflow engine, which resumes its
// unfinished executions and serves the control endpoint the workflow start
// command uses.
func (w *Worker) openEngine(context.Context) error {
	e := engine.NewEngine(filepath.Join(w.Flags.DataDir, "engine.db"))
	e.Conn, e.Publisher, e.ServeControl = w.Bus.Conn, publishers.NewJetStream(w.Bus.JetStream), true
	e.Logger = w.Logger.With("component", "engine")
	if err := e.Open(); err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	w.Engine = e
	w.closers = append(w.closers, e.Close)
	return nil
}

func (w *Worker) openHTTP(ctx context.Context) error {
	if err := w.Flags.ConsoleFlags.Check(); err != nil {
		return err
	}
	in, err := w.ingester()
	if err != nil {
		return err
	}
	execs, err := w.executions(ctx)
	if err != nil {
		return err
	}
	w.HTTP = &httpapi.Server{
		Addr: w.Flags.HTTPAddr, AllowedHosts: w.Flags.HTTPAllowedHosts, Limits: httpapi.Limits{MaxConns: w.Flags.HTTPMaxConns, MaxConnsPerClient: w.Flags.HTTPMaxConnsPerIP},
		Logger: w.Logger.With("component", "http"), Auth: w.Auth, Redaction: w.Redaction,
		Live: w.Live, Ready: w.Ready, Metrics: w.metricsHandler(), Ingest: in,
		History: replay.NewHistory(w.Bus.JetStream), Executions: execs, Contract: contract.Files(),
		Events: replay.NewEventFeed(&replay.Reader{JS: w.Bus.JetStream}), DeadLetters: replay.DeadLetters{Reader: &replay.Reader{JS: w.Bus.JetStream}},
		TraceUI: w.Flags.TraceUIURL,
	}
	if w.jobs != nil {
		w.HTTP.Jobs = w.jobs
	}
	if w.View != nil { // a role without a view has none of these
		w.HTTP.Views, w.HTTP.Checkpoint = w.View, w.View
	}
	if c := w.openConsole(); c != nil {
		w.HTTP.Console = c
	}
	if err := w.HTTP.Open(); err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	w.closers = append(w.closers, w.HTTP.Close)
	w.Logger.Info("http listening", "url", w.HTTP.URL())
	return nil
}

// Ready is the readiness check: NATS connected, streams and consumers in
// place, view open and caught up once.
func (w *Worker) Ready() error {
	if err := w.natsHealth(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	for _, d := range w.durables() {
		if err := w.checkDurable(ctx, d); err != nil {
			return err
		}
	}
	if w.View == nil {
		return nil // the ingest role keeps no view
	}
	if _, err := w.View.Checkpoint(ctx); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if err := w.View.Health(); err != nil {
		return err // names the file, the page and the rebuild command
	}
	return w.streamHealth()
}

// Run runs the consumers until ctx is done or one of them fails, then lets
// each finish the batch in hand.
func (w *Worker) Run(ctx context.Context) error {
	err := RunGroup(ctx, w.actors()...)
	w.drainChangeFeed()
	if !errors.Is(err, consumers.ErrPullStopped) && !errors.Is(err, nats.ErrConnectionClosed) {
		return err
	}
	// A pull consumer stops when its connection closed or its stream went
	// away, and any other part may be the first to meet the closed
	// connection; say why it closed, rather than that it did. The
	// connection's closed handler may run a moment after a part noticed.
	select {
	case <-w.Bus.Lost():
		return w.Bus.LostErr()
	case <-time.After(time.Second):
	}
	if w.Projector != nil {
		if lerr := w.compareRunning(context.WithoutCancel(ctx)); lerr != nil {
			return lerr
		}
	}
	return err
}

// Close stops HTTP, closes the view and NATS, in reverse order of opening.
func (w *Worker) Close() error {
	var errs []error
	for i := len(w.closers) - 1; i >= 0; i-- {
		errs = append(errs, w.closers[i]())
	}
	w.closers = nil
	ratelog.Flush(w.Logger.Handler()) // a burst's held-back lines are counted before the process ends
	return errors.Join(errs...)
}
