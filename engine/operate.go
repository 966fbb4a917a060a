package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/substatehq/substate"
)

var _ substate.IdempotentOperator = (*Engine)(nil)

// Idempotent reports that the context's idempotency key makes a restart
// act once (the new execution's name is derived from it).
func (e *Engine) Idempotent(a substate.ExecutionAction) bool { return a == substate.ActionRestart }

// DescribeExecution describes an execution from its durable record: the
// state it is in (or ended in), the input it started with, the output it
// ended with, and the attempts of the current task.
func (e *Engine) DescribeExecution(ctx context.Context, id string) (substate.ExecutionInfo, error) {
	if e.db == nil {
		return substate.ExecutionInfo{}, errors.New("describe execution: engine is not open")
	}
	rec, err := e.db.execution(id)
	if err != nil {
		return substate.ExecutionInfo{}, err
	}
	info := substate.ExecutionInfo{
		TenantID: rec.TenantID, Provider: substate.ProviderEngine, ExecutionID: rec.ID, Workflow: rec.Workflow,
		ProviderState: rec.Status, Step: rec.State, Input: rec.Input, Output: rec.Output,
		Error: rec.Error, Cause: rec.Cause, StartedAt: rec.StartedAt, StoppedAt: rec.EndedAt,
		Attempts: rec.Attempt, Ended: rec.Phase == phaseDone, Redrives: rec.Redrives,
	}
	if rec.Stopped {
		info.ProviderState, info.Stopped = "stopped", true
	}
	switch {
	case rec.Phase != phaseDone:
		info.RetryRefusal = "the execution is still running"
	case rec.Status != substate.EngineFailed:
		info.RetryRefusal = "the execution succeeded"
	default:
		info.Retryable = true
	}
	return info, nil
}

// StopExecution stops a running execution with the cause as its error
// message (Stop). The engine's stop is always immediate, so Kill changes
// nothing.
func (e *Engine) StopExecution(ctx context.Context, id string, opts substate.StopOptions) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	return e.Stop(ctx, id, "", opts.Cause)
}

// RetryExecution redrives a failed execution (stopped ones included): it
// enters the state it failed in again, with the input that state had, under
// the same id. When that state is a Fail state reached through a catch, it
// enters the Task whose error the catcher took instead, with that Task's
// input: running the Fail state again could only fail again. The retry count goes on from where it was; a workflow
// timeout starts afresh.
func (e *Engine) RetryExecution(ctx context.Context, id string) error {
	if e.db == nil {
		return errors.New("retry execution: engine is not open")
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	rec, err := e.db.execution(id)
	if err == nil && rec.Phase == phaseDone {
		if err := e.waitRunner(ctx, id); err != nil {
			return err
		}
		rec, err = e.db.execution(id)
	}
	if err != nil {
		return err
	}
	if rec.Phase != phaseDone || rec.Status != substate.EngineFailed {
		return substate.Errorf(substate.ECONFLICT, "execution %q is %s: only a failed execution can be retried", id, rec.Status)
	}
	def, err := e.definition(rec.Definition)
	if err != nil {
		return err
	}
	if st := def.states[rec.State]; st == nil {
		return substate.Errorf(substate.ECONFLICT, "execution %q failed in state %q, which its definition does not have", id, rec.State)
	} else if st.typ == typeFail && !rec.Stopped && rec.Caught != "" && def.states[rec.Caught] != nil {
		// A Fail state fails again: start over at the task whose error led there.
		rec.State, rec.Data = rec.Caught, rec.CaughtData
	}
	// A redrive is a new visit of the state: its attempts get idempotency
	// keys of their own, so a task service that remembers keys runs them.
	rec.Step++
	rec.Redrives++
	now := e.Clock.Now()
	rec.Phase, rec.Status, rec.Stopped = phaseEnter, substate.EngineRunning, false
	rec.Error, rec.Cause, rec.EndedAt, rec.Output = "", "", timeZero, nil
	rec.Attempt, rec.Deadline, rec.TimeoutAt = 0, timeZero, timeZero
	rec.CaughtTasks = nil // a redrive is not a retry of the failure it redrives
	if def.Timeout > 0 {
		rec.TimeoutAt = now.Add(def.Timeout)
	}
	rec.emit(now, substate.EngineRunning, func(ev *substate.EngineEvent) { ev.RetryCount = rec.Retries })
	if err := e.db.putExecution(rec); err != nil {
		return fmt.Errorf("store redriven execution: %w", err)
	}
	e.Logger.Info("execution redriven", "execution", id, "state", rec.State)
	e.launch(rec, def) // the runner publishes the running event first
	return nil
}

// RestartExecution starts a new execution of the same workflow, for the
// same tenant, with the same input, under a generated name; with an
// idempotency key in the context, under a name derived from it, so that
// asking again returns the execution the first ask started.
func (e *Engine) RestartExecution(ctx context.Context, id string) (string, error) {
	if e.db == nil {
		return "", errors.New("restart execution: engine is not open")
	}
	rec, err := e.db.execution(id)
	if err != nil {
		return "", err
	}
	name := ""
	if key := substate.IdempotencyKey(ctx); key != "" {
		sum := sha256.Sum256([]byte(key))
		name = "restart-" + hex.EncodeToString(sum[:12])
	}
	x, err := e.Start(ctx, StartRequest{Workflow: rec.Workflow, Name: name, TenantID: rec.TenantID, Input: rec.Input})
	if err != nil {
		return "", err
	}
	return x.ID, nil
}

// waitRunner waits until the execution's runner, if one runs, has exited;
// only for a finished execution, whose runner exits once its events are
// published. While NATS refuses them that can take any time: ctx bounds
// the wait.
func (e *Engine) waitRunner(ctx context.Context, id string) error {
	e.mu.Lock()
	r := e.runners[id]
	e.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return substate.WrapError(substate.EUNAVAILABLE, ctx.Err(),
			"execution %q ended but its last events are not published yet: try again once NATS takes them", id)
	}
}
