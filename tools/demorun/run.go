// Package demorun is "substate demo": a worker on the embedded defaults,
// driven by real traffic (order workflows on the built-in engine, Step
// Functions and Restate events through the HTTP ingress) until every
// tenant has settled, with each change printed as it happens, a live
// status line on a terminal, and a summary of the view at the end.
package demorun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/worker"
)

// Config is one run of the demo.
type Config struct {
	Tenants int           // tenants running the order workflow on the built-in engine
	Timeout time.Duration // give up when the tenants have not settled by then
	Stay    bool          // keep the worker and its console running after the summary, until ctx ends
	Flags   worker.Flags  // the worker the demo drives
	Out     io.Writer     // where the demo's lines go

	// Ready, when set, is called with the worker once the demo stays
	// after its summary.
	Ready func(w *worker.Worker)
}

// demoRun is one run of the demo.
type demoRun struct {
	w      *worker.Worker
	out    io.Writer
	mu     sync.Mutex        // serializes output lines
	expect map[string]string // tenant → the sub-state it should settle in
	start  time.Time

	// The live status line (live.go), guarded by mu.
	current map[string]substate.SubState // tenant → its sub-state now
	live    bool                         // the status line is shown
	drawn   bool                         // it is on screen now
	tick    chan struct{}                // closed to stop redrawing it
}

// Run runs the demo and fails when a tenant settles other than expected.
func Run(ctx context.Context, c Config) (err error) {
	w := worker.New(c.Flags)
	logs, err := c.logFile(w)
	if err != nil {
		return err
	}
	defer func() { _ = logs.Close() }() // unbuffered: every line was written as it came
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	runCtx, stop := context.WithCancel(ctx)
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = w.Run(runCtx); close(exited) }()
	defer func() { stop(); <-exited }()

	d := &demoRun{w: w, out: c.Out, expect: map[string]string{}, current: map[string]substate.SubState{}, start: time.Now()}
	stopTasks, err := d.serveTasks()
	if err != nil {
		return err
	}
	defer stopTasks()
	err = d.run(ctx, c.Tenants, c.Timeout)
	d.stopLive()
	// An interrupted demo still reads the view for its summary.
	stay := c.Stay && ctx.Err() == nil
	d.summary(context.WithoutCancel(ctx), ctx.Err() != nil, stay)
	if !stay {
		return err
	}
	if c.Ready != nil {
		c.Ready(w)
	}
	// The worker serves until interrupted, or until it fails: then the
	// demo fails with it rather than keep a dead console open.
	select {
	case <-ctx.Done():
		return err
	case <-exited:
		return cmp.Or(runErr, err)
	}
}

// logFile sends the worker's logs to <data-dir>/demo.log, so the demo's
// own lines stay readable.
func (c Config) logFile(w *worker.Worker) (*os.File, error) {
	f, err := worker.OpenLogFile(filepath.Join(c.Flags.DataDir, "demo.log"))
	if err != nil {
		return nil, err
	}
	w.Logger = c.Flags.LogFlags.LoggerTo(f)
	return f, nil
}

// serveTasks starts the demo's task services; they serve until the
// returned func is called, so an operator's retry after the summary (with
// --stay) is served too.
func (d *demoRun) serveTasks() (func(), error) {
	tasks, err := d.w.Bus.ConnectAs(bus.Tasks, "substate-demo-tasks")
	if err != nil {
		return nil, err
	}
	svc, err := demo.Register(tasks)
	if err == nil {
		err = tasks.Flush() // the services listen before the first workflow asks
	}
	if err != nil {
		tasks.Close()
		return nil, err
	}
	return func() { _ = svc.Stop(); tasks.Close() }, nil
}

func (d *demoRun) run(ctx context.Context, tenants int, timeout time.Duration) error {
	sub, err := d.w.Bus.Conn.Subscribe(substate.SubjectChangesPrefix+">", d.printChange)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }() // the connection closes with the worker anyway
	d.printf("substate demo: %d tenants on the built-in engine, 3 on Step Functions and Restate (through HTTP ingress at %s)\n", tenants, d.w.HTTP.URL())
	d.printf("Console: open %s/ to watch every tenant live (--stay keeps it running after the summary)\n\n", d.w.HTTP.URL())
	d.showLive(ctx)
	if err := d.startEngine(ctx, tenants); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, s := range providerStories(d.start) {
		d.expect[s.tenant] = s.want
		wg.Go(func() { errs <- d.play(ctx, s) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return d.settle(ctx, timeout)
}

// startEngine starts the order workflow for each engine tenant, taking the
// demo scenarios in turn.
func (d *demoRun) startEngine(ctx context.Context, n int) error {
	ref, err := d.w.Engine.EnsureWorkflow(ctx, engine.Workflow{Name: "order_processing_workflow", Definition: demo.Workflow})
	if err != nil {
		return err
	}
	run := d.start.UTC().Format("20060102T150405")
	for i := range n {
		s := demo.Scenarios[i%len(demo.Scenarios)]
		tenant := s.TenantID
		if i >= len(demo.Scenarios) {
			tenant = fmt.Sprintf("%s-%d", s.TenantID, i/len(demo.Scenarios)+1)
		}
		d.expect[tenant] = s.Outcome
		input := mergeInput(s.Input, tenant)
		if _, err := d.w.Engine.Start(ctx, engine.StartRequest{Workflow: ref, Name: s.Name + "-" + tenant + "-" + run, TenantID: tenant, Input: input}); err != nil {
			return err
		}
		d.printf("%-22s engine         %s\n", tenant, s.Story)
	}
	return nil
}

// mergeInput adds the tenant id to a scenario's input object.
func mergeInput(in json.RawMessage, tenant string) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(in, &m)
	m["tenantId"] = tenant
	out, _ := json.Marshal(m)
	return out
}

// play posts a provider tenant's events through the ingress, one every
// 700 ms so the changes can be watched.
func (d *demoRun) play(ctx context.Context, s providerStory) error {
	d.printf("%-22s %-14s %s\n", s.tenant, s.provider, s.story)
	for _, step := range s.steps {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(700 * time.Millisecond):
		}
		if err := d.post(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until every tenant is in a terminal sub-state.
func (d *demoRun) settle(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pending := d.pending(ctx)
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: tenants not settled after %s: %v", timeout, pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pending returns the tenants whose view is not terminal yet.
func (d *demoRun) pending(ctx context.Context) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(d.expect)) {
		v, err := d.w.View.Tenant(ctx, t)
		if err != nil || !v.WorkflowSubState.Terminal() {
			out = append(out, t)
		}
	}
	return out
}

// printChange prints one change-feed message as a line.
func (d *demoRun) printChange(m *nats.Msg) {
	e, err := substate.UnmarshalChangeEvent(m.Data)
	if err != nil {
		return
	}
	c := e.Data
	line := fmt.Sprintf("%6.1fs  %-22s %-11s → %-11s retries=%d", time.Since(d.start).Seconds(), c.TenantID,
		termtext.Dash(string(c.Old.WorkflowSubState)), c.New.WorkflowSubState, c.New.WorkflowRetryCount)
	if e := c.New.WorkflowErrorMessage; e != "" {
		line += fmt.Sprintf("  error=%q", termtext.Clip(e, 70))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.current[c.TenantID] = c.New.WorkflowSubState
	d.write(line + "\n")
}

func (d *demoRun) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.write(fmt.Sprintf(format, args...))
}
