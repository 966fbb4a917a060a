package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/jsonx"
)

// runner drives one execution in its own goroutine.
type runner struct {
	rec    *record
	def    *Definition
	cancel context.CancelFunc
	done   chan struct{}
}

// launch starts the runner of rec unless the engine is closing or one runs.
func (e *Engine) launch(rec *record, def *Definition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.runners[rec.ID] != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.ctx)
	r := &runner{rec: rec, def: def, cancel: cancel, done: make(chan struct{})}
	e.runners[rec.ID] = r
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(r.done)
		defer cancel()
		e.run(ctx, r)
		e.mu.Lock()
		delete(e.runners, rec.ID)
		e.mu.Unlock()
	}()
}

// run publishes what is pending, then takes one step after another,
// persisting each new record before acting on it, until the execution
// finishes or ctx ends.
// A step runs under the workflow's timeout; publishing does not.
func (e *Engine) run(ctx context.Context, r *runner) {
	stepCtx, release := e.timeoutContext(ctx, r.rec.TimeoutAt)
	defer release()
	for {
		if err := e.flush(ctx, r.rec); err != nil {
			return
		}
		if r.rec.Phase == phaseDone {
			return
		}
		next, err := e.stepOrTimeout(ctx, stepCtx, r)
		if err != nil {
			if ctx.Err() == nil {
				e.Logger.Error("execution step failed", "execution", r.rec.ID, "state", r.rec.State, "err", err)
			}
			return
		}
		if err := e.db.putExecution(next); err != nil {
			e.Logger.Error("persist execution", "execution", next.ID, "err", err)
			return
		}
		r.rec = next
	}
}

// step computes the record that follows rec. An error means no step was
// taken (the engine is closing); the record stays as it was.
func (e *Engine) step(ctx context.Context, def *Definition, rec *record) (*record, error) {
	st := def.states[rec.State]
	if st == nil {
		return e.finish(rec, substate.EngineFailed, &TaskError{Type: ErrTaskFailed, Message: fmt.Sprintf("state %q not in definition", rec.State)}), nil
	}
	switch rec.Phase {
	case phaseEnter:
		return e.enter(rec, st), nil
	case phaseAttempt:
		return e.attempt(ctx, rec, st)
	case phaseBackoff:
		if err := e.Clock.SleepUntil(ctx, rec.Deadline); err != nil {
			return nil, err
		}
		rec.Attempt++
		rec.Phase, rec.Deadline = phaseAttempt, timeZero
		e.emitAttempt(rec, substate.EngineRunning)
		return rec, nil
	case phaseWait:
		if err := e.Clock.SleepUntil(ctx, rec.Deadline); err != nil {
			return nil, err
		}
		return moveTo(rec, st.next.name, rec.Data), nil
	}
	return nil, fmt.Errorf("unknown phase %q", rec.Phase)
}

// enter executes a state's entry: a Task's first attempt, a Choice's
// decision, a Wait's deadline, or the end of the execution.
func (e *Engine) enter(rec *record, st *state) *record {
	switch st.typ {
	case typeTask:
		rec.Phase, rec.Attempt = phaseAttempt, 1
		if i := slices.Index(rec.CaughtTasks, rec.State); i >= 0 {
			// Entered again after a catcher took its failure: a retry.
			rec.Retries++
			rec.CaughtTasks = slices.Delete(rec.CaughtTasks, i, i+1)
		}
		e.emitAttempt(rec, substate.EngineRunning)
	case typeChoice:
		return e.decide(rec, st)
	case typeWait:
		rec.Phase, rec.Deadline = phaseWait, st.timestamp
		if st.hasSecs {
			rec.Deadline = e.Clock.Now().Add(st.seconds)
		}
		rec.emit(e.Clock.Now(), substate.EngineWaiting, nil)
	case typeSuccess:
		rec.Output = rec.Data
		return e.finish(rec, substate.EngineSucceeded, nil)
	case typeFail:
		te := &TaskError{Type: st.errType, Message: st.cause}
		if te.Type == "" {
			te.Type = "Failed"
		}
		return e.finish(rec, substate.EngineFailed, te)
	}
	return rec
}

// decide moves a Choice state to the next of its first matching rule, its
// default, or fails the execution with NoChoiceMatched.
func (e *Engine) decide(rec *record, st *state) *record {
	input, err := jsonx.Decode(rec.Data)
	if err != nil {
		return e.finish(rec, substate.EngineFailed, taskErrorf(ErrPath, "state input is not JSON: %v", err))
	}
	for _, c := range st.choices {
		if c.cond.eval(input) {
			return moveTo(rec, c.next.name, rec.Data)
		}
	}
	if st.dflt.name != "" {
		return moveTo(rec, st.dflt.name, rec.Data)
	}
	return e.finish(rec, substate.EngineFailed, taskErrorf(ErrNoChoiceMatched, "no choice rule matched and there is no default"))
}

// moveTo enters state next with data as its input.
func moveTo(rec *record, next string, data json.RawMessage) *record {
	rec.Phase, rec.State, rec.Data = phaseEnter, next, data
	rec.Attempt, rec.Deadline = 0, timeZero
	rec.Step++
	return rec
}

// finish ends the execution: succeeded, or failed with te.
func (e *Engine) finish(rec *record, status string, te *TaskError) *record {
	now := e.Clock.Now()
	rec.Phase, rec.Status, rec.EndedAt, rec.Deadline = phaseDone, status, now, timeZero
	if te != nil {
		rec.Error, rec.Cause = te.Type, te.Message
	}
	rec.emit(now, status, func(ev *substate.EngineEvent) {
		ev.Attempt, ev.RetryCount, ev.Stopped = rec.Attempt, rec.Retries, rec.Stopped
		if te != nil {
			ev.ErrorType, ev.Error = te.Type, te.Message
		}
		if status == substate.EngineSucceeded {
			ev.Output, ev.OutputSize = boundedOutput(rec.Output)
		}
	})
	return rec
}

// boundedOutput is the output a succeeded event carries: the execution's
// output when it is at most substate.MaxEngineOutput bytes, else none;
// and its size.
func boundedOutput(out json.RawMessage) (json.RawMessage, int) {
	if len(out) > substate.MaxEngineOutput {
		return nil, len(out)
	}
	return out, len(out)
}

// emitAttempt emits an event about the current task attempt.
func (e *Engine) emitAttempt(rec *record, status string) {
	rec.emit(e.Clock.Now(), status, func(ev *substate.EngineEvent) {
		ev.Attempt, ev.RetryCount = rec.Attempt, rec.Retries
	})
}
