package actions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/operate"
)

// Defaults of a Runner.
const (
	// DefaultMaxJobs is how many jobs a worker runs at once; more wait on
	// the stream (a paused job keeps its place).
	DefaultMaxJobs = 4
	// DefaultAckWait is how long a job whose worker stopped waits before
	// another worker (or the same one restarted) takes it up.
	DefaultAckWait = 30 * time.Second
	// ControlEvery is how often a running job reads its controls.
	ControlEvery = 250 * time.Millisecond
	// MaxTries is how many times a member whose provider gave no answer is
	// tried before its outcome is recorded as unknown.
	MaxTries = 5
)

// RequeueFunc maps the raw message at a SUBSTATE_RAW sequence again,
// publishing its events only when allow accepts every tenant they are of,
// and returns how many were published (the worker's RequeueRaw).
type RequeueFunc func(ctx context.Context, rawSeq uint64, allow func(tenantID string) error) (int, error)

// Runner runs a worker's share of the fleet jobs: it takes jobs from the
// durable consumer substate-actions, runs at most MaxJobs at once, tells
// JetStream every AckWait/3 that it still holds each, and acknowledges a
// job when it ends. A job whose worker stops (kill -9 included) is
// delivered again after AckWait, to this worker restarted or to another,
// which resumes it from its record and SUBSTATE_AUDIT. Set the fields,
// then Open; Close stops it.
type Runner struct {
	JS    jetstream.JetStream
	Views operate.TenantReader
	// Operators, Pollers, Raw and Audit are what the members are acted on
	// with (an operate.Service of the runner's own, its operators and
	// pollers limited by their lanes).
	Operators map[substate.Provider]substate.ExecutionOperator
	Pollers   map[substate.Provider]substate.StatusPoller
	Raw       substate.RawPublisher
	Audit     substate.AuditPublisher
	// Requeue maps dead letters again; nil: requeue members are refused.
	Requeue RequeueFunc
	// Rules are the providers' rules (providers/…): what their API calls
	// cost, the retries they refuse, what a pending action may be waiting
	// for.
	Rules map[substate.Provider]substate.ProviderRules
	// Hints say what configures each provider's operator (operate.Service's).
	Hints map[substate.Provider]string
	// Limits are each lane's limits; nil means DefaultLimits(Rules).
	Limits   map[string]Limits
	AckWait  time.Duration
	MaxJobs  int
	Replicas int
	// Worker names this worker in the jobs' state marks.
	Worker string
	// Settle and Watch are operate.Service's: how long an action's effect
	// is waited for, and how long a pending one is re-checked.
	Settle, Watch time.Duration
	// Throttle is the backoff of a lane after a throttled call; zero
	// means ThrottleBase and ThrottleMax.
	Throttle timex.Backoff
	// Retry is the backoff of a member whose action got no answer, before
	// it is tried again (MaxTries in all); zero means 1 s doubling to 8 s.
	Retry  timex.Backoff
	Logger *slog.Logger

	svc     *operate.Service
	lanes   map[string]*lane
	store   *store
	leases  *leases
	cons    jetstream.Consumer
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]*heldJob
}

// heldJob is a job this runner runs, with its latest delivery.
type heldJob struct {
	mu  sync.Mutex
	msg jetstream.Msg
}

func (h *heldJob) message() jetstream.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg
}

// Open creates the streams and the consumer, and starts taking jobs.
func (r *Runner) Open(ctx context.Context) error {
	topo := bus.DefaultTopology()
	topo.Replicas = max(r.Replicas, 1)
	if err := topo.EnsureActionStreams(ctx, r.JS); err != nil {
		return err
	}
	cfg := bus.ConsumerConfig(bus.ConsumerActions, r.ackWait(), r.Replicas)
	cfg.FilterSubject = substate.SubjectActionsPrefix + "*." + partJob
	cons, err := bus.EnsureConsumer(ctx, r.JS, substate.StreamActions, cfg)
	if err != nil {
		return err
	}
	r.cons, r.store, r.leases, r.running = cons, newStore(r.JS), &leases{js: r.JS}, map[string]*heldJob{}
	r.buildLanes()
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.take()
	return nil
}

// buildLanes makes the lanes and the operate.Service whose operators and
// pollers wait for them.
func (r *Runner) buildLanes() {
	limits := r.Limits
	if limits == nil {
		limits = DefaultLimits(r.Rules)
	}
	r.lanes = map[string]*lane{}
	for name, l := range limits {
		r.lanes[name] = newLane(name, l, laneCosts(r.Rules, name), r.Throttle)
	}
	ops := map[substate.Provider]substate.ExecutionOperator{}
	for p, op := range r.Operators {
		if ln := r.lanes[string(p)]; ln != nil {
			op = limited{op: op, lane: ln}
		}
		ops[p] = op
	}
	pollers := map[substate.Provider]substate.StatusPoller{}
	for p, poller := range r.Pollers {
		if ln := r.lanes[string(p)]; ln != nil {
			poller = limitedPoller{p: poller, lane: ln}
		}
		pollers[p] = poller
	}
	r.svc = &operate.Service{Views: r.Views, Operators: ops, Pollers: pollers, Raw: r.Raw, Audit: r.Audit,
		Rules: r.Rules, Hints: r.Hints, Settle: r.Settle, Watch: r.Watch, Logger: r.logger()}
}

// Close stops taking jobs and members, waits for the actions under way,
// and gives the jobs it held back to the stream at once.
func (r *Runner) Close() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.wg.Wait()
	return nil
}

// take fetches jobs while a slot is free, and runs each in its own
// goroutine.
func (r *Runner) take() {
	defer r.wg.Done()
	slots := make(chan struct{}, cmp.Or(r.MaxJobs, DefaultMaxJobs))
	for r.ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-r.ctx.Done():
			return
		}
		msg, ok := r.fetch()
		if !ok {
			<-slots
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-slots }()
			r.hold(msg)
		}()
	}
}

// fetch waits a moment for one job.
func (r *Runner) fetch() (jetstream.Msg, bool) {
	batch, err := r.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		if r.ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoMessages) {
			r.logger().Warn("fleet jobs not fetched", "err", err)
			_ = timex.Sleep(r.ctx, time.Second)
		}
		return nil, false
	}
	for msg := range batch.Messages() {
		return msg, true
	}
	return nil, false
}

// hold runs a delivered job to its end, telling JetStream it still holds
// it; a job delivered again while it runs here (its ack wait passed while
// NATS was away) goes on with the new delivery.
func (r *Runner) hold(msg jetstream.Msg) {
	var rec record
	if err := json.Unmarshal(msg.Data(), &rec); err != nil || checkJobID(rec.ID) != nil {
		r.logger().Error("fleet job record unreadable: dropped", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	r.mu.Lock()
	if h := r.running[rec.ID]; h != nil {
		h.mu.Lock()
		h.msg = msg
		h.mu.Unlock()
		r.mu.Unlock()
		return
	}
	h := &heldJob{msg: msg}
	r.running[rec.ID] = h
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, rec.ID)
		r.mu.Unlock()
	}()
	ctx, stop := context.WithCancel(r.ctx)
	defer stop()
	go r.heartbeat(ctx, h)
	r.finish(h, r.runJob(ctx, rec))
}

// finish acknowledges a job that ended, and gives one that did not back.
func (r *Runner) finish(h *heldJob, err error) {
	msg := h.message()
	switch {
	case err == nil:
		_ = msg.Ack()
	case r.ctx.Err() != nil:
		_ = msg.Nak() // the worker stops: the next one takes it up at once
	default:
		r.logger().Error("fleet job interrupted; it resumes", "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
	}
}

// heartbeat tells JetStream every AckWait/3 that the job is still held.
func (r *Runner) heartbeat(ctx context.Context, h *heldJob) {
	t := time.NewTicker(r.ackWait() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = h.message().InProgress()
		}
	}
}

func (r *Runner) ackWait() time.Duration { return cmp.Or(r.AckWait, DefaultAckWait) }

// retryDelay is the wait before the next try of a member that got no
// answer tries times.
func (r *Runner) retryDelay(tries int) time.Duration {
	b := r.Retry
	if b.Base <= 0 {
		b = timex.Backoff{Base: time.Second, Max: 8 * time.Second}
	}
	return b.Delay(tries + 1)
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}
