// Package operate acts on tenants' executions from one place, whichever
// provider runs them: it finds a tenant's current execution in the view,
// asks that provider's substate.ExecutionOperator to describe, stop, retry
// or restart it, checks first what the provider would refuse, records every
// action on the audit stream, and publishes the provider's fresh status as
// raw evidence so the view shows the result without waiting for a poll.
package operate

import (
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

// Service is the substate.ExecutionService of a worker. Set the fields
// before use; Views, Operators and Audit are required.
type Service struct {
	Views     TenantReader
	Operators map[substate.Provider]substate.ExecutionOperator
	// Pollers, when a provider has one, read the execution's status after
	// an action; it is published on Raw so the view changes at once.
	Pollers map[substate.Provider]substate.StatusPoller
	Raw     substate.RawPublisher
	// Audit records every action taken (dry runs are not actions).
	Audit  substate.AuditPublisher
	Now    func() time.Time
	Logger *slog.Logger
}

var _ substate.ExecutionService = (*Service)(nil)

// Describe describes the tenant's current execution.
func (s *Service) Describe(ctx context.Context, tenantID string) (substate.ExecutionInfo, error) {
	_, info, err := s.current(ctx, tenantID)
	return info, err
}

// current returns the operator of the tenant's current execution and its
// description.
func (s *Service) current(ctx context.Context, tenantID string) (substate.ExecutionOperator, substate.ExecutionInfo, error) {
	v, err := s.Views.Tenant(ctx, tenantID)
	if err != nil {
		return nil, substate.ExecutionInfo{}, err
	}
	if v.WorkflowExecutionID == "" {
		return nil, substate.ExecutionInfo{}, substate.Errorf(substate.ENOTFOUND,
			"tenant %q has no execution to act on (it is %s; a succeeded execution is not kept)", tenantID, v.WorkflowSubState)
	}
	op := s.Operators[v.Provider]
	if op == nil {
		return nil, substate.ExecutionInfo{}, substate.Errorf(substate.EUNAVAILABLE,
			"tenant %q runs on %s, which this worker cannot act on: %s", tenantID, v.Provider, configHint(v.Provider))
	}
	info, err := op.DescribeExecution(ctx, v.WorkflowExecutionID)
	if err != nil {
		return nil, substate.ExecutionInfo{}, err
	}
	info.TenantID = tenantID
	return op, info, nil
}

// configHint says what configures the operator of a provider.
func configHint(p substate.Provider) string {
	switch p {
	case substate.ProviderStepFunctions:
		return "configure an AWS region (--aws-region or AWS_REGION)"
	case substate.ProviderRestate:
		return "set --restate-admin-url"
	}
	return "no operator is configured for it"
}

// Act takes (or, in a dry run, checks) one action on the tenant's current
// execution. What the provider would refuse is refused before any call:
// stopping an ended execution, retrying one that is not retryable,
// restarting one still running. Every action taken is recorded as an audit
// event, refused ones included, with the error.
func (s *Service) Act(ctx context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, error) {
	if err := checkRequest(req); err != nil {
		return substate.ExecutionResult{}, err
	}
	op, info, err := s.current(ctx, req.TenantID)
	if err != nil {
		return substate.ExecutionResult{}, err
	}
	res := substate.ExecutionResult{
		Action: req.Action, DryRun: req.DryRun, TenantID: req.TenantID, Provider: info.Provider,
		ExecutionID: info.ExecutionID, Who: req.Who, Reason: req.Reason, At: s.now(), Execution: info,
	}
	if err := precondition(req, info); err != nil || req.DryRun {
		return res, err
	}
	// Once asked for, an action runs to its end and is recorded even when
	// the caller goes away: a provider call cut off midway may have acted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ActionTimeout)
	defer cancel()
	res.NewExecutionID, err = s.perform(ctx, op, req, info)
	ev := s.auditEvent(req, res, err)
	res.AuditID = ev.ID
	if aerr := s.Audit.PublishAudit(ctx, ev); aerr != nil {
		s.logger().Error("audit event not recorded", "action", req.Action, "tenant", req.TenantID, "who", req.Who, "err", aerr)
		if err == nil {
			err = substate.WrapError(substate.EUNAVAILABLE, aerr, "%s of %s was done, but its audit event could not be recorded", req.Action, info.ExecutionID)
		}
	}
	if err != nil {
		return res, err
	}
	s.logger().Info("execution action", "action", req.Action, "tenant", req.TenantID, "provider", info.Provider,
		"execution", info.ExecutionID, "new_execution", res.NewExecutionID, "who", req.Who, "reason", req.Reason)
	if req.Action == substate.ActionStop {
		s.publishStop(ctx, op, info.Provider, info.ExecutionID, stopCause(req))
		return res, nil
	}
	s.refresh(ctx, info.Provider, info.ExecutionID, res.NewExecutionID)
	return res, nil
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
		NewExecutionID: res.NewExecutionID, Outcome: substate.AuditDone,
	}
	if err != nil {
		ev.Outcome, ev.ErrorCode, ev.Error = substate.AuditOutcome(err), substate.ErrorCode(err), substate.ErrorMessage(err)
	}
	return ev
}

// refresh publishes the provider's status of the executions acted on, when
// it has a poller; a failure only delays the view until the next poll.
func (s *Service) refresh(ctx context.Context, p substate.Provider, ids ...string) {
	poller := s.Pollers[p]
	if poller == nil || s.Raw == nil {
		return
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		raw, err := poller.Poll(ctx, id, true)
		if err == nil {
			err = s.Raw.PublishRaw(ctx, raw)
		}
		if err != nil {
			s.logger().Warn("status after the action not published; the next poll will show it", "execution", id, "err", err)
		}
	}
}

// StopSettle bounds how long a stop waits for the provider to report the
// execution ended (Restate completes a cancelled invocation once its
// handler has run its compensations), and StopPoll how often it asks.
const (
	StopSettle = 30 * time.Second
	StopPoll   = 250 * time.Millisecond
)

// publishStop publishes the provider's status of a stopped execution once
// it has ended, with the cause in substate.HeaderStopCause: a provider that
// keeps no cause (Restate) then shows it as the view's error. The raw
// event's id is the status's own with "/stopped" appended, so the stream
// keeps it beside the same status published without the cause. An
// execution that does not end within StopSettle is published as it is:
// the view then shows the provider's own text, and the audit event the
// cause.
func (s *Service) publishStop(ctx context.Context, op substate.ExecutionOperator, p substate.Provider, id, cause string) {
	poller := s.Pollers[p]
	if poller == nil || s.Raw == nil {
		return
	}
	s.awaitEnd(ctx, op, id)
	raw, err := poller.Poll(ctx, id, true)
	if err == nil {
		if raw.Header == nil {
			raw.Header = map[string]string{}
		}
		raw.Header[substate.HeaderStopCause] = cause
		raw.ID += "/stopped"
		err = s.Raw.PublishRaw(ctx, raw)
	}
	if err != nil {
		s.logger().Warn("status after the stop not published; the next poll will show it, without the cause", "execution", id, "err", err)
	}
}

// awaitEnd waits until the provider describes the execution as ended, for
// at most StopSettle.
func (s *Service) awaitEnd(ctx context.Context, op substate.ExecutionOperator, id string) {
	ctx, cancel := context.WithTimeout(ctx, StopSettle)
	defer cancel()
	t := time.NewTicker(StopPoll)
	defer t.Stop()
	for {
		if info, err := op.DescribeExecution(ctx, id); err == nil && info.Ended {
			return
		}
		select {
		case <-ctx.Done():
			s.logger().Warn("stopped execution has not ended yet", "execution", id, "waited", StopSettle)
			return
		case <-t.C:
		}
	}
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
