// Package operate acts on tenants' executions from one place, whichever
// provider runs them: it finds a tenant's current execution in the view,
// asks that provider's substate.ExecutionOperator to describe, stop, retry
// or restart it, checks first what the provider would refuse, reads the
// provider's state back after acting so that an action is done only when
// that state shows it, records every action on the audit stream (and a
// pending action's outcome once it is known), and publishes the provider's
// fresh status as raw evidence so the view shows the result without
// waiting for a poll.
package operate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/substatehq/substate"
)

// MaxReason bounds the reason of an action, in bytes.
const MaxReason = 4096

// ActionTimeout bounds an action taken, its audit event and the status read
// after it. They do not end with the request that asked for them.
const ActionTimeout = time.Minute

// TenantReader returns one tenant's view (substate.ViewStore has it).
type TenantReader interface {
	Tenant(ctx context.Context, id string) (substate.TenantView, error)
}

// LastExecutionReader names a tenant's last execution when the view no
// longer shows it (the view clears a succeeded execution's id); the view
// store has it. A Service whose Views have it describes a finished
// execution too.
type LastExecutionReader interface {
	LastExecution(ctx context.Context, id string) (string, error)
}

// Service is the substate.ExecutionService of a worker. Set the fields
// before use; Views, Operators and Audit are required.
type Service struct {
	Views     TenantReader
	Operators map[substate.Provider]substate.ExecutionOperator
	// Pollers, when a provider has one, read the execution's status after
	// an action; it is published on Raw so the view changes at once.
	Pollers map[substate.Provider]substate.StatusPoller
	Raw     substate.RawPublisher
	// Rules are the providers' rules (providers/…): what a provider may be
	// doing with an action it accepted whose effect is not seen yet, for
	// the pending answer's next step.
	Rules map[substate.Provider]substate.ProviderRules
	// Hints say what configures each provider's operator, for the error
	// of an action on a provider without one.
	Hints map[substate.Provider]string
	// Audit records every action taken (dry runs are not actions).
	Audit  substate.AuditPublisher
	Now    func() time.Time
	Logger *slog.Logger
	// Settle bounds how long an action waits for its effect to show
	// before it reports pending; zero means DefaultSettle.
	Settle time.Duration
	// Watch bounds how long a pending action is re-checked in the
	// background for its follow-up audit event, and Every how often; zero
	// means DefaultWatch and WatchEvery.
	Watch, Every time.Duration

	watch watcher
}

var _ substate.ExecutionService = (*Service)(nil)

// Describe describes the tenant's current execution, or its last one when
// it succeeded (the view keeps no id for it): its output is there to read,
// redacted below the admin scope like any description.
func (s *Service) Describe(ctx context.Context, tenantID string) (substate.ExecutionInfo, error) {
	v, err := s.Views.Tenant(ctx, tenantID)
	if err != nil {
		return substate.ExecutionInfo{}, err
	}
	v.TenantID = tenantID
	if last, ok := s.Views.(LastExecutionReader); ok && v.WorkflowExecutionID == "" {
		if v.WorkflowExecutionID, err = last.LastExecution(ctx, tenantID); err != nil {
			return substate.ExecutionInfo{}, err
		}
	}
	_, info, err := s.describe(ctx, v)
	return info, err
}

// describe describes the execution the view names, with its operator.
func (s *Service) describe(ctx context.Context, v substate.TenantView) (substate.ExecutionOperator, substate.ExecutionInfo, error) {
	if v.WorkflowExecutionID == "" {
		return nil, substate.ExecutionInfo{}, substate.Errorf(substate.ENOTFOUND,
			"tenant %q has no execution to act on (it is %s; a succeeded execution is not kept)", v.TenantID, v.WorkflowSubState)
	}
	op, err := s.operator(v.Provider, v.TenantID)
	if err != nil {
		return nil, substate.ExecutionInfo{}, err
	}
	info, err := op.DescribeExecution(ctx, v.WorkflowExecutionID)
	if err != nil {
		return nil, substate.ExecutionInfo{}, err
	}
	info.TenantID = v.TenantID
	return op, info, nil
}

// operator returns the operator of a provider.
func (s *Service) operator(p substate.Provider, tenantID string) (substate.ExecutionOperator, error) {
	op := s.Operators[p]
	if op == nil {
		return nil, &unconfiguredError{substate.Errorf(substate.EUNAVAILABLE,
			"tenant %q runs on %s, which this worker cannot act on: %s", tenantID, p, s.configHint(p))}
	}
	return op, nil
}

// configHint says what configures the operator of a provider.
func (s *Service) configHint(p substate.Provider) string {
	if hint := s.Hints[p]; hint != "" {
		return hint
	}
	return "no operator is configured for it"
}

// Act takes (or, in a dry run, checks) one action on the tenant's current
// execution. What the provider would refuse is refused before any call:
// stopping an ended execution, retrying one that is not retryable,
// restarting one still running; an action on an execution or sub-state the
// request no longer matches is skipped. Once the provider took the action,
// its state is read back (for up to Settle): the outcome is done only when
// it shows the effect, refused when the execution had ended otherwise
// (ECONFLICT), and pending while the effect is not seen, with what happens
// next; a pending action is re-checked in the background, and its outcome
// recorded by a follow-up audit event. Every action taken is recorded as
// an audit event, refused ones included, with the error. An action of a
// fleet job (req.Job) differs as ExecutionRequest.Job says.
func (s *Service) Act(ctx context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, error) {
	if err := checkRequest(req); err != nil {
		return substate.ExecutionResult{}, err
	}
	v, err := s.Views.Tenant(ctx, req.TenantID)
	if err != nil && req.Before == nil {
		return s.viewGone(ctx, req, err)
	}
	v.TenantID = req.TenantID
	if req.Before != nil && !req.DryRun {
		if res, decided, err := s.resolve(ctx, req); decided {
			return res, err
		}
		if err != nil {
			return s.viewGone(ctx, req, err)
		}
	}
	res := substate.ExecutionResult{
		Action: req.Action, DryRun: req.DryRun, TenantID: req.TenantID, Provider: v.Provider,
		ExecutionID: cmp.Or(req.ExecutionID, v.WorkflowExecutionID), Who: req.Who, Reason: req.Reason, At: s.now(),
	}
	if changed := changedSince(req, v); changed != "" {
		return s.skip(ctx, req, res, changed)
	}
	op, info, err := s.describe(ctx, v)
	if err != nil {
		return s.undescribed(ctx, req, res, err)
	}
	res.Execution, res.Provider, res.ExecutionID = info, info.Provider, info.ExecutionID
	if err := precondition(req, info); err != nil || req.DryRun {
		if err != nil && req.Job != "" {
			res.Outcome = substate.AuditRefused
			return s.Record(ctx, req, res, err)
		}
		return res, err
	}
	return s.take(ctx, op, req, res)
}

// take asks the provider to act, reads its state back and records the
// outcome.
func (s *Service) take(ctx context.Context, op substate.ExecutionOperator, req substate.ExecutionRequest, res substate.ExecutionResult) (substate.ExecutionResult, error) {
	// Once asked for, an action runs to its end and is recorded even when
	// the caller goes away: a provider call cut off midway may have acted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ActionTimeout)
	defer cancel()
	if req.Intent != nil {
		if err := req.Intent(ctx, withoutData(res.Execution)); err != nil {
			return res, substate.WrapError(substate.EUNAVAILABLE, err, "%s of %s not asked: its intent could not be recorded", req.Action, res.ExecutionID)
		}
	}
	var err error
	res.NewExecutionID, err = s.perform(substate.WithIdempotencyKey(ctx, idempotencyKey(req, res.Execution)), op, req, res.Execution)
	if req.Job != "" && substate.ErrorCode(err) == substate.ETHROTTLED {
		return res, err // the job backs off and asks again: throttling is no outcome
	}
	if err == nil {
		res.Outcome, res.Next, err = s.readBack(ctx, op, req, res)
	} else {
		res.Outcome = substate.AuditOutcome(err)
	}
	res, err = s.Record(ctx, req, res, err)
	if err != nil || res.Outcome == substate.AuditPending {
		if res.Outcome == substate.AuditPending && req.Job == "" {
			s.watch.start(s, req, res)
		}
		return res, err
	}
	s.publishResult(ctx, req, res)
	return res, nil
}

// changedSince returns why the tenant no longer matches what the request
// acted on, or "".
func changedSince(req substate.ExecutionRequest, v substate.TenantView) string {
	switch {
	case req.ExecutionID != "" && req.ExecutionID != v.WorkflowExecutionID:
		return fmt.Sprintf("changed: the tenant's execution is now %s, not %s", v.WorkflowExecutionID, req.ExecutionID)
	case req.SubState != "" && req.SubState != v.WorkflowSubState:
		return fmt.Sprintf("changed: the tenant is now %s, not %s", v.WorkflowSubState, req.SubState)
	}
	return ""
}

// skip records an action skipped because the tenant changed, and returns
// its result (not an error: skipping is an outcome).
func (s *Service) skip(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult, why string) (substate.ExecutionResult, error) {
	res.Outcome, res.Next = substate.AuditSkipped, why
	if req.DryRun {
		return res, nil
	}
	return s.Record(ctx, req, res, nil)
}

// checkRequest bounds what the caller sent.
func checkRequest(req substate.ExecutionRequest) error {
	if _, err := substate.ParseExecutionAction(string(req.Action)); err != nil {
		return err
	}
	if err := substate.ValidateTenantID(req.TenantID); err != nil {
		return substate.WrapError(substate.EINVALID, err, "%s", substate.ErrorMessage(err))
	}
	if len(req.Reason) > MaxReason || !utf8.ValidString(req.Reason) {
		return substate.Errorf(substate.EINVALID, "the reason must be UTF-8 text of at most %d bytes", MaxReason)
	}
	if req.Kill && req.Action != substate.ActionStop {
		return substate.Errorf(substate.EINVALID, "kill applies to stop only")
	}
	if strings.TrimSpace(req.Who) == "" {
		return substate.Errorf(substate.EINVALID, "an action needs to say who takes it")
	}
	return nil
}

// precondition refuses what the provider would refuse, saying why.
func precondition(req substate.ExecutionRequest, info substate.ExecutionInfo) error {
	switch req.Action {
	case substate.ActionStop:
		if info.Ended {
			return substate.Errorf(substate.ECONFLICT, "execution %s already ended (%s): there is nothing to stop", info.ExecutionID, info.ProviderState)
		}
		if req.Kill && info.KillRefusal != "" {
			return substate.Errorf(substate.EINVALID, "execution %s cannot be killed: %s", info.ExecutionID, info.KillRefusal)
		}
	case substate.ActionRetry:
		if !info.Retryable {
			return substate.Errorf(substate.ECONFLICT, "execution %s cannot be retried: %s", info.ExecutionID, info.RetryRefusal)
		}
	case substate.ActionRestart:
		if !info.Ended {
			return substate.Errorf(substate.ECONFLICT, "execution %s is still %s: stop it before starting it again", info.ExecutionID, info.ProviderState)
		}
	}
	return nil
}

// perform asks the provider to act.
func (s *Service) perform(ctx context.Context, op substate.ExecutionOperator, req substate.ExecutionRequest, info substate.ExecutionInfo) (string, error) {
	switch req.Action {
	case substate.ActionStop:
		return "", op.StopExecution(ctx, info.ExecutionID, substate.StopOptions{Cause: stopCause(req), Kill: req.Kill})
	case substate.ActionRetry:
		return "", op.RetryExecution(ctx, info.ExecutionID)
	default:
		return op.RestartExecution(ctx, info.ExecutionID)
	}
}

// stopCause is the cause of a stop: the reason given, else who stopped it.
func stopCause(req substate.ExecutionRequest) string {
	if req.Reason != "" {
		return req.Reason
	}
	return "stopped by " + req.Who
}

// auditEvent records an action and its outcome.
func (s *Service) auditEvent(req substate.ExecutionRequest, res substate.ExecutionResult, err error) substate.AuditEvent {
	ev := substate.AuditEvent{
		ID: newID(), Time: res.At, Action: req.Action, Who: req.Who, Reason: req.Reason, Kill: req.Kill,
		TenantID: req.TenantID, Provider: res.Provider, ExecutionID: res.ExecutionID,
		NewExecutionID: res.NewExecutionID, Outcome: res.Outcome, Detail: res.Next,
		Job: req.Job, Member: req.Member,
	}
	if req.Job != "" {
		ev.ID = substate.JobAuditID(req.Job, req.Member)
	}
	if err != nil {
		ev.ErrorCode, ev.Error = substate.ErrorCode(err), substate.ErrorMessage(err)
	}
	return ev
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now()
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// newID returns a random audit event id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("audit-%s", hex.EncodeToString(b[:]))
}
