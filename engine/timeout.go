package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/substatehq/substate"
)

// errWorkflowTimeout is the cause of a step context cancelled because the
// workflow's timeout passed.
var errWorkflowTimeout = errors.New("workflow timeout")

// timeoutContext returns a context that is cancelled with
// errWorkflowTimeout when the clock reaches deadline (never when deadline
// is zero), and a function that releases it and waits for its timer.
func (e *Engine) timeoutContext(ctx context.Context, deadline time.Time) (context.Context, func()) {
	if deadline.IsZero() {
		return ctx, func() {}
	}
	tctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if e.Clock.SleepUntil(tctx, deadline) == nil {
			cancel(errWorkflowTimeout)
		}
	}()
	return tctx, func() {
		cancel(nil)
		<-done
	}
}

// timedOut reports whether rec's workflow timeout has passed: stepCtx was
// cancelled for it, or the clock reached it.
func (e *Engine) timedOut(stepCtx context.Context, rec *record) bool {
	if rec.TimeoutAt.IsZero() {
		return false
	}
	return errors.Is(context.Cause(stepCtx), errWorkflowTimeout) || !e.Clock.Now().Before(rec.TimeoutAt)
}

// timeout ends an execution whose workflow timeout passed: failed with
// TimeoutError, in whatever state it was. No retry or catch applies; the
// timeout bounds the whole execution.
func (e *Engine) timeout(rec *record) *record {
	limit := rec.TimeoutAt.Sub(rec.StartedAt)
	return e.finish(rec, substate.EngineFailed, taskErrorf(ErrTimeout,
		"the workflow did not finish within its timeout of %s", limit))
}

// stepOrTimeout takes the next step of r's execution, or ends it when its
// workflow timeout has passed, before or during the step. An error means
// the engine is closing or the execution is being stopped.
func (e *Engine) stepOrTimeout(ctx, stepCtx context.Context, r *runner) (*record, error) {
	if e.timedOut(stepCtx, r.rec) {
		return e.timeout(r.rec.clone()), nil
	}
	next, err := e.step(stepCtx, r.def, r.rec.clone())
	if err != nil && ctx.Err() == nil && e.timedOut(stepCtx, r.rec) {
		return e.timeout(r.rec.clone()), nil
	}
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", r.rec.State, err)
	}
	return next, nil
}
