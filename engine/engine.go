package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/substatehq/substate"
)

// DefaultTaskTimeout bounds a task attempt whose state sets no timeout.
const DefaultTaskTimeout = 60 * time.Second

var _ Provider = (*Engine)(nil)

// Engine is substate's built-in workflow engine. Set the exported fields,
// then call Open; Close stops it. Executions survive a restart: Open resumes
// every unfinished one where it was.
type Engine struct {
	// Path is the bbolt file the engine keeps its state in
	// (conventionally <data-dir>/engine.db).
	Path string
	// Conn carries task requests and the control endpoint.
	Conn *nats.Conn
	// Publisher puts the engine's status events on SUBSTATE_RAW.
	Publisher substate.RawPublisher
	// Clock tells the time and times waits and backoffs.
	Clock Clock
	// Logger receives the engine's logs.
	Logger *slog.Logger
	// TaskTimeout bounds task attempts whose state sets no timeout.
	TaskTimeout time.Duration
	// Jitter returns a number in [0,1) that spreads retry delays; see the
	// package documentation.
	Jitter func() float64
	// ServeControl makes Open serve the control endpoint (substate.engine.start).
	ServeControl bool

	db      *store
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	runners map[string]*runner
	defs    map[string]*Definition // parsed definitions by key
	svc     micro.Service
	opMu    sync.Mutex // one operator action (stop, retry) at a time
}

// NewEngine returns an engine that keeps its state in path, with the
// system clock, the default logger, DefaultTaskTimeout and the control
// endpoint on. Conn and Publisher must be set before Open.
func NewEngine(path string) *Engine {
	return &Engine{
		Path:         path,
		Clock:        SystemClock{},
		Logger:       slog.Default(),
		TaskTimeout:  DefaultTaskTimeout,
		Jitter:       rand.Float64,
		ServeControl: true,
	}
}

// Open opens the store, resumes unfinished executions and, when
// ServeControl is set, serves the control endpoint.
func (e *Engine) Open() error {
	if e.Conn == nil || e.Publisher == nil {
		return errors.New("open engine: Conn and Publisher are required")
	}
	e.defaults()
	db, err := openStore(e.Path)
	if err != nil {
		return err
	}
	e.db = db
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.runners = map[string]*runner{}
	e.defs = map[string]*Definition{}
	if err := e.resume(); err != nil {
		_ = e.Close()
		return err
	}
	if e.ServeControl {
		if e.svc, err = e.serveControl(); err != nil {
			_ = e.Close()
			return err
		}
	}
	return nil
}

// defaults fills the fields an Engine built without NewEngine left unset.
func (e *Engine) defaults() {
	if e.Clock == nil {
		e.Clock = SystemClock{}
	}
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	if e.TaskTimeout <= 0 {
		e.TaskTimeout = DefaultTaskTimeout
	}
	if e.Jitter == nil {
		e.Jitter = rand.Float64
	}
}

// resume starts a runner for every unfinished execution.
func (e *Engine) resume() error {
	recs, err := e.db.unfinished()
	if err != nil {
		return fmt.Errorf("resume executions: %w", err)
	}
	for _, rec := range recs {
		def, err := e.definition(rec.Definition)
		if err != nil { // one bad record must not keep the others from running
			e.Logger.Error("cannot resume execution", "execution", rec.ID, "err", err)
			continue
		}
		e.Logger.Info("resuming execution", "execution", rec.ID, "state", rec.State, "phase", rec.Phase)
		e.launch(rec, def)
	}
	return nil
}

// Close stops the control endpoint and every runner, waits for them and
// closes the store. Executions stay where they were, ready for the next Open.
func (e *Engine) Close() error {
	e.mu.Lock()
	already := e.closed
	e.closed = true
	e.mu.Unlock()
	if already {
		return nil
	}
	var errs []error
	if e.svc != nil {
		errs = append(errs, e.svc.Stop())
	}
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	if e.db != nil {
		errs = append(errs, e.db.close())
	}
	return errors.Join(errs...)
}

// definition returns the parsed definition stored under key.
func (e *Engine) definition(key string) (*Definition, error) {
	e.mu.Lock()
	def := e.defs[key]
	e.mu.Unlock()
	if def != nil {
		return def, nil
	}
	src, err := e.db.definition(key)
	if err != nil {
		return nil, err
	}
	if def, err = Parse("", src); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	e.mu.Lock()
	e.defs[key] = def
	e.mu.Unlock()
	return def, nil
}

// Name returns substate.ProviderEngine.
func (e *Engine) Name() substate.Provider { return substate.ProviderEngine }

// EnsureWorkflow validates a definition and stores it under w.Name (the
// definition's own name when w.Name is empty), which is the reference it
// returns. A name that holds a different definition gets the new one; running
// executions keep the definition they started with.
func (e *Engine) EnsureWorkflow(ctx context.Context, w Workflow) (string, error) {
	def, err := Parse(w.Name, w.Definition)
	if err != nil {
		return "", substate.WrapError(substate.EINVALID, err, "invalid workflow definition")
	}
	name := w.Name
	if name == "" {
		name = def.Name
	}
	changed, err := e.db.putWorkflow(name, w.Definition)
	if err != nil {
		return "", fmt.Errorf("store workflow: %w", err)
	}
	if changed {
		e.Logger.Info("workflow stored", "workflow", name, "version", def.Version)
	}
	return name, nil
}

// DeleteWorkflow forgets a workflow; its executions are not affected.
func (e *Engine) DeleteWorkflow(ctx context.Context, ref string) error {
	return e.db.deleteWorkflow(ref)
}

// Describe returns an execution's newest status event as the raw evidence.
// The engine does not import mapping: the caller maps Raw like any raw
// event.
func (e *Engine) Describe(ctx context.Context, executionID string) (Status, error) {
	rec, err := e.db.execution(executionID)
	if err != nil {
		return Status{}, err
	}
	ev := rec.Last
	if ev.Seq == 0 { // nothing emitted yet: it is running
		ev = substate.EngineEvent{ID: substate.EngineEventID(rec.ID, 0), TenantID: rec.TenantID,
			ExecutionID: rec.ID, Workflow: rec.Workflow, Status: substate.EngineRunning,
			State: rec.State, StartedAt: rec.StartedAt, Time: rec.StartedAt}
	}
	raw, err := rawEvent(ev)
	return Status{Raw: raw}, err
}
