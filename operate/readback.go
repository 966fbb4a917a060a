package operate

import (
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
)

// Defaults of a Service's read-back and follow-up.
const (
	// DefaultSettle is how long an action waits for its effect to show
	// before it reports pending.
	DefaultSettle = 10 * time.Second
	// DefaultWatch is how long a pending action is re-checked in the
	// background.
	DefaultWatch = 10 * time.Minute
	// ReadBackEvery is how often the provider's state is read back while
	// an action settles, and WatchEvery while a pending one is watched.
	ReadBackEvery = 250 * time.Millisecond
	WatchEvery    = 5 * time.Second
)

// readBack reads the provider's state after an action it took, until the
// state shows the action's outcome or Settle passes, and returns the
// outcome, what happens next when it is pending, and the error of a
// refusal the state shows (a stop that found the execution ended).
func (s *Service) readBack(ctx context.Context, op substate.ExecutionOperator, req substate.ExecutionRequest, res substate.ExecutionResult) (outcome, next string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.settle())
	defer cancel()
	t := time.NewTicker(ReadBackEvery)
	defer t.Stop()
	for {
		outcome, err = effect(ctx, op, req, res)
		if outcome != substate.AuditPending {
			return outcome, "", err
		}
		select {
		case <-ctx.Done():
			return substate.AuditPending, s.pendingNext(req, res), nil
		case <-t.C:
		}
	}
}

// effect reads the provider's state once and returns the outcome it shows
// of an action the provider took: done when the state shows its effect,
// refused (with the error) when it shows the action changed nothing, and
// pending otherwise (a read that fails shows nothing).
func effect(ctx context.Context, op substate.ExecutionOperator, req substate.ExecutionRequest, res substate.ExecutionResult) (string, error) {
	if req.Action == substate.ActionRestart {
		if _, err := op.DescribeExecution(ctx, res.NewExecutionID); err != nil {
			return substate.AuditPending, nil
		}
		return substate.AuditDone, nil
	}
	after, err := op.DescribeExecution(ctx, res.ExecutionID)
	if err != nil {
		return substate.AuditPending, nil
	}
	return shows(req, res.Execution, after)
}

// shows returns the outcome the execution's description after a stop or
// a retry shows, against its description before: done, refused (a stop
// that found the execution ended otherwise) or pending. A stop without
// Kill that finds the execution killed changed nothing: a kill (another
// action, with its own audit event) ended it before the cancel did.
func shows(req substate.ExecutionRequest, before, after substate.ExecutionInfo) (string, error) {
	switch req.Action {
	case substate.ActionStop:
		switch {
		case after.Ended && after.Killed && !req.Kill:
			return substate.AuditRefused, substate.Errorf(substate.ECONFLICT,
				"execution %s was killed before the cancel reached it: the cancel changed nothing (the kill's audit event records the stop)", after.ExecutionID)
		case after.Ended && after.Stopped:
			return substate.AuditDone, nil
		case after.Ended:
			return substate.AuditRefused, substate.Errorf(substate.ECONFLICT,
				"execution %s ended (%s) before the stop reached it: the stop changed nothing", after.ExecutionID, after.ProviderState)
		}
	case substate.ActionRetry:
		if after.ProviderState != before.ProviderState || after.Redrives > before.Redrives {
			return substate.AuditDone, nil
		}
	}
	return substate.AuditPending, nil
}

// pendingNext says what substate does about a pending action, what the
// provider may be doing, and what the caller may do.
func (s *Service) pendingNext(req substate.ExecutionRequest, res substate.ExecutionResult) string {
	next := fmt.Sprintf("the provider accepted the %s, but its effect is not seen after %s: substate keeps checking every %s for up to %s and records the outcome in a follow-up audit event",
		req.Action, s.settle(), s.every(), s.watchFor())
	if pending := s.Rules[res.Provider].Pending; pending != nil {
		next = pending(req, res, next)
	}
	if req.Action == substate.ActionRestart {
		next = fmt.Sprintf("the new execution %s is not described by the provider yet; ", res.NewExecutionID) + next
	}
	return next
}

// Recheck reads the provider's state again for a pending action (a result
// Act returned with AuditPending) and, when the state now shows its
// outcome, records it as a follow-up audit event (Settles: the action's
// audit id) and returns the result with that outcome; a result whose
// outcome is known is returned as it is. A fleet job re-checks its
// pending members with it.
func (s *Service) Recheck(ctx context.Context, res substate.ExecutionResult, req substate.ExecutionRequest) (substate.ExecutionResult, error) {
	if res.Outcome != substate.AuditPending {
		return res, nil
	}
	op, err := s.operator(res.Provider, res.TenantID)
	if err != nil {
		return res, err
	}
	outcome, err := effect(ctx, op, req, res)
	if outcome == substate.AuditPending {
		return res, nil
	}
	return s.settleFollowUp(ctx, req, res, outcome, err)
}

// settleFollowUp records the outcome of a pending action once known, and
// publishes the execution's status as after a settled action.
func (s *Service) settleFollowUp(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult, outcome string, cause error) (substate.ExecutionResult, error) {
	settles := res.AuditID
	res.Outcome, res.Next, res.At = outcome, "", s.now()
	ev := s.auditEvent(req, res, cause)
	ev.Settles = settles
	if req.Job != "" {
		ev.ID += ".settled"
	}
	if err := s.Audit.PublishAudit(ctx, ev); err != nil {
		return res, substate.WrapError(substate.EUNAVAILABLE, err, "the outcome of %s of %s is %s, but its audit event could not be recorded", res.Action, res.ExecutionID, outcome)
	}
	res.AuditID = ev.ID
	s.logger().Info("execution action settled", "action", res.Action, "tenant", res.TenantID, "execution", res.ExecutionID,
		"outcome", outcome, "settles", settles)
	if outcome == substate.AuditDone {
		s.publishResult(ctx, req, res)
	}
	return res, cause
}

func (s *Service) settle() time.Duration {
	if s.Settle > 0 {
		return s.Settle
	}
	return DefaultSettle
}

func (s *Service) watchFor() time.Duration {
	if s.Watch > 0 {
		return s.Watch
	}
	return DefaultWatch
}

func (s *Service) every() time.Duration {
	if s.Every > 0 {
		return s.Every
	}
	return WatchEvery
}
