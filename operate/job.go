package operate

import (
	"context"
	"errors"
	"fmt"

	"github.com/substatehq/substate"
)

// unconfiguredError is the error of a provider this worker has no
// operator for: a refusal for a fleet job, which asking again cannot
// change.
type unconfiguredError struct{ err *substate.Error }

// Error returns the *substate.Error's message.
func (e *unconfiguredError) Error() string { return e.err.Error() }

// Unwrap returns the *substate.Error.
func (e *unconfiguredError) Unwrap() error { return e.err }

// Record records an action's outcome (res.Outcome) as its audit event,
// with the error it rests on, and returns the result with the event's id.
// Act records what it decides; a fleet job records with it what it
// decides itself (a member its lane gave up on as unknown, one outside the
// key's tenants). For a single action it returns cause, as Act does; for
// a job's it returns only a failure to record: the outcome is the answer.
func (s *Service) Record(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult, cause error) (substate.ExecutionResult, error) {
	if res.At.IsZero() {
		res.At = s.now()
	}
	ev := s.auditEvent(req, res, cause)
	res.AuditID = ev.ID
	if err := s.Audit.PublishAudit(context.WithoutCancel(ctx), ev); err != nil {
		s.logger().Error("audit event not recorded", "action", req.Action, "tenant", req.TenantID, "who", req.Who, "err", err)
		if cause != nil && req.Job == "" {
			return res, cause
		}
		return res, substate.WrapError(substate.EUNAVAILABLE, err, "%s of %s was %s, but its audit event could not be recorded", req.Action, res.ExecutionID, res.Outcome)
	}
	s.logger().Info("execution action", "action", req.Action, "tenant", req.TenantID, "provider", res.Provider,
		"execution", res.ExecutionID, "new_execution", res.NewExecutionID, "outcome", res.Outcome, "who", req.Who,
		"reason", req.Reason, "job", req.Job)
	if req.Job != "" {
		return res, nil
	}
	return res, cause
}

// viewGone answers an action on a tenant the view could not return: a
// job's member no longer in the view is skipped as changed.
func (s *Service) viewGone(ctx context.Context, req substate.ExecutionRequest, err error) (substate.ExecutionResult, error) {
	if req.Job == "" || substate.ErrorCode(err) != substate.ENOTFOUND {
		return substate.ExecutionResult{}, err
	}
	res := substate.ExecutionResult{Action: req.Action, TenantID: req.TenantID, ExecutionID: req.ExecutionID, Who: req.Who, Reason: req.Reason, At: s.now()}
	return s.skip(ctx, req, res, "changed: the tenant is no longer in the view")
}

// undescribed answers an action whose execution could not be described:
// for a job's member, what asking again cannot change (no operator for the
// provider, an execution the provider does not know, a permission the
// credentials lack) is refused and recorded; the rest is returned for the
// job to try again.
func (s *Service) undescribed(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult, err error) (substate.ExecutionResult, error) {
	var unconfigured *unconfiguredError
	switch code := substate.ErrorCode(err); {
	case req.Job == "" || req.DryRun:
		return res, err
	case errors.As(err, &unconfigured), code == substate.ENOTFOUND, code == substate.EFORBIDDEN, code == substate.EINVALID:
		res.Outcome = substate.AuditRefused
		return s.Record(ctx, req, res, err)
	}
	return res, err
}

// resolve decides an action the job may have asked for before it
// stopped (req.Before), from the provider's state of the execution then:
// done when the state shows the effect; a restart asked again at once when
// the operator honors the idempotency key (the same key starts no second
// execution), unknown when it does not; otherwise undecided (decided
// false), and the action goes its normal way, with the same key. An error
// with decided true is the provider's, for the job to try again.
func (s *Service) resolve(ctx context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, bool, error) {
	before := *req.Before
	res := substate.ExecutionResult{Action: req.Action, TenantID: req.TenantID, Provider: before.Provider, ExecutionID: before.ExecutionID,
		Who: req.Who, Reason: req.Reason, At: s.now(), Execution: before}
	op, err := s.operator(before.Provider, req.TenantID)
	if err != nil {
		return res, false, nil
	}
	if req.Action == substate.ActionRestart {
		if idem, ok := op.(substate.IdempotentOperator); ok && idem.Idempotent(req.Action) {
			res, err := s.take(ctx, op, req, res)
			return res, true, err
		}
		res.Outcome, res.Next = substate.AuditUnknown, fmt.Sprintf("the worker stopped while it asked %s to restart %s, and %s cannot be asked again without perhaps starting a second execution: "+
			"describe the tenant's execution to see whether it started", before.Provider, before.ExecutionID, before.Provider)
		res, err := s.Record(ctx, req, res, nil)
		return res, true, err
	}
	info, err := op.DescribeExecution(ctx, before.ExecutionID)
	if err != nil {
		return res, true, err
	}
	if got, _ := shows(req, before, info); got != substate.AuditDone {
		return res, false, nil
	}
	res.Outcome, res.Next = substate.AuditDone, "taken before the worker restarted: the provider's state read back shows it"
	res, err = s.Record(ctx, req, res, nil)
	return res, true, err
}

// idempotencyKey is the key of a job's action on a provider: the job, the
// tenant and the execution, and for a retry the redrives before it, so a
// resumed job asking again is the same request while a later retry of
// the same execution is a new one. A single action has none.
func idempotencyKey(req substate.ExecutionRequest, info substate.ExecutionInfo) string {
	if req.Job == "" {
		return ""
	}
	key := req.Job + "/" + req.TenantID + "/" + info.ExecutionID
	if req.Action == substate.ActionRetry {
		key += fmt.Sprintf("/r%d", info.Redrives)
	}
	return key
}

// withoutData is an execution's description without its input and
// output, which a job's intent does not keep.
func withoutData(info substate.ExecutionInfo) substate.ExecutionInfo {
	info.Input, info.Output = nil, nil
	return info
}
