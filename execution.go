package substate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ExecutionAction is what an operator does to a tenant's current execution.
type ExecutionAction string

// The actions on an execution. Describe only reads; the others change the
// execution and are recorded on the audit stream.
const (
	ActionDescribe ExecutionAction = "describe"
	ActionStop     ExecutionAction = "stop"
	ActionRetry    ExecutionAction = "retry"
	ActionRestart  ExecutionAction = "restart"
)

// ParseExecutionAction returns the action that changes an execution named
// s: stop, retry or restart.
func ParseExecutionAction(s string) (ExecutionAction, error) {
	switch a := ExecutionAction(s); a {
	case ActionStop, ActionRetry, ActionRestart:
		return a, nil
	}
	return "", Errorf(EINVALID, "unknown execution action %q (want stop, retry or restart)", s)
}

// ExecutionInfo describes one execution as its provider reports it: what an
// operator needs before acting on it.
type ExecutionInfo struct {
	TenantID    string   `json:"tenantId"`
	Provider    Provider `json:"provider"`
	ExecutionID string   `json:"executionId"`
	Workflow    string   `json:"workflow,omitempty"`
	// ProviderState is the provider's own status (RUNNING, ABORTED,
	// paused, failed…).
	ProviderState string `json:"providerState"`
	// Step is the current step: the engine's state, the last state Step
	// Functions entered, Restate's target handler.
	Step string `json:"step,omitempty"`
	// Input and Output are the execution's, as JSON; a reader without the
	// admin scope sees them redacted.
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	Cause  string          `json:"cause,omitempty"`
	// StartedAt and StoppedAt bound the execution; StoppedAt is zero while
	// it runs.
	StartedAt time.Time `json:"startedAt,omitzero"`
	StoppedAt time.Time `json:"stoppedAt,omitzero"`
	// Attempts is how many times the current step ran (engine, Step
	// Functions: since the step was entered); on Restate, the retry count
	// the view shows, by the same mapping: the failed attempts retried or
	// waiting for a retry.
	Attempts int `json:"attempts"`
	// Redrives is how many times the execution was redriven or resumed,
	// where the provider counts it.
	Redrives int `json:"redrives,omitempty"`
	// Ended reports whether the execution is over (stopping it is refused).
	Ended bool `json:"ended"`
	// Stopped reports an ended execution that a stop ended (Step
	// Functions' ABORTED, Restate's killed or cancelled, the engine's
	// stopped): what tells a stop that took effect from one that came
	// after the execution had ended.
	Stopped bool `json:"stopped,omitempty"`
	// Killed reports a stopped execution that a kill ended (Restate's
	// killed, not cancelled): a cancel still pending when it ended did not
	// end it.
	Killed bool `json:"killed,omitempty"`
	// Retryable reports whether retry may act on it; RetryRefusal says why
	// not when it may not.
	Retryable    bool   `json:"retryable"`
	RetryRefusal string `json:"retryRefusal,omitempty"`
	// KillRefusal says why the provider refuses a stop with Kill (Step
	// Functions has no kill); empty where a kill is taken.
	KillRefusal string `json:"killRefusal,omitempty"`
}

// StopOptions say how to stop an execution.
type StopOptions struct {
	// Cause is why; it becomes the execution's error where the provider
	// keeps one.
	Cause string
	// Kill ends a Restate invocation at once, without running its
	// compensations (Restate's kill rather than cancel).
	Kill bool
}

// ExecutionOperator acts on the executions of one provider. Unknown ids
// are ENOTFOUND; what the provider refuses is ECONFLICT (not redrivable,
// already ended) or EFORBIDDEN (a missing permission, named).
type ExecutionOperator interface {
	// DescribeExecution returns the execution's current description.
	DescribeExecution(ctx context.Context, id string) (ExecutionInfo, error)
	// StopExecution ends a running execution.
	StopExecution(ctx context.Context, id string, opts StopOptions) error
	// RetryExecution takes a failed (Restate: paused) execution up again
	// from where it failed, under the same id.
	RetryExecution(ctx context.Context, id string) error
	// RestartExecution starts a new execution of the same workflow with
	// the same input and returns its id.
	RestartExecution(ctx context.Context, id string) (string, error)
}

// ExecutionRequest asks for one action on a tenant's current execution.
type ExecutionRequest struct {
	TenantID string          `json:"tenantId"`
	Action   ExecutionAction `json:"action"`
	// Reason is why the operator acts; the cause of a stop.
	Reason string `json:"reason,omitempty"`
	// Kill makes a stop of a Restate invocation a kill.
	Kill bool `json:"kill,omitempty"`
	// DryRun checks that the action would be accepted without taking it.
	DryRun bool `json:"dryRun,omitempty"`
	// ExecutionID and SubState, when set, are what the caller saw of the
	// tenant (a fleet action's frozen member): if the tenant's execution
	// or sub-state is no longer that, the action is skipped (AuditSkipped)
	// and nothing reaches the provider.
	ExecutionID string   `json:"executionId,omitempty"`
	SubState    SubState `json:"subState,omitempty"`
	// Who asked: an API key's name, or "loopback".
	Who string `json:"who"`
	// Job and Member, for an action of a fleet job, are the job's id and
	// the member's 1-based position in its frozen set: the action's audit
	// event is the job's (its id derived from them, so recording it again
	// is a duplicate JetStream drops), its provider call carries an
	// idempotency key (job, tenant, execution and, for a retry, the
	// redrives before it), a throttled call is returned to the job to try
	// again later rather than recorded, and a pending outcome is left to
	// the job to re-check.
	Job    string `json:"job,omitempty"`
	Member int    `json:"member,omitempty"`
	// Intent, when set, is called with the execution's description just
	// before the provider is asked to act: a job records it durably, so
	// that after a restart it knows it may have acted (Before).
	Intent func(ctx context.Context, before ExecutionInfo) error `json:"-"`
	// Before, when set, says the job may already have asked the provider
	// for this action, when the execution was as Before describes it (its
	// worker stopped between the call and its record): the action is not
	// asked again when the provider's state shows it was taken, nor when
	// asking again could act twice.
	Before *ExecutionInfo `json:"-"`
}

// JobAuditID is the id of the audit event that records a job member's
// outcome; a follow-up event's id adds a suffix to it.
func JobAuditID(job string, member int) string {
	return fmt.Sprintf("%s.%d", job, member)
}

// ExecutionResult is what an action did (or, in a dry run, would do).
type ExecutionResult struct {
	Action         ExecutionAction `json:"action"`
	DryRun         bool            `json:"dryRun"`
	TenantID       string          `json:"tenantId"`
	Provider       Provider        `json:"provider"`
	ExecutionID    string          `json:"executionId"`
	NewExecutionID string          `json:"newExecutionId,omitempty"` // restart
	Who            string          `json:"who"`
	Reason         string          `json:"reason,omitempty"`
	At             time.Time       `json:"at"`
	// Execution is the execution as it was described before the action.
	Execution ExecutionInfo `json:"execution"`
	// AuditID is the id of the audit event that records the action.
	AuditID string `json:"auditId,omitempty"`
	// Outcome is what the provider's state, read back after the action,
	// shows of it: AuditDone, AuditPending, AuditRefused, AuditUnknown or
	// AuditSkipped; empty for a dry run.
	Outcome string `json:"outcome,omitempty"`
	// Next says, for a pending action, what substate does next about it
	// (and what the caller may do).
	Next string `json:"next,omitempty"`
}

// Outcomes of an action, per execution acted on: an action's result and
// its audit event say one of these, and a fleet action reports one per
// member. Only what the provider's state, read back, shows is done.
const (
	// AuditDone: the provider's state read back confirms the action took
	// effect (a stopped execution ended as stopped, a retried one left
	// the state it was retried in, a restart's new execution exists).
	AuditDone = "done"
	// AuditPending: the provider accepted the action, and its effect is
	// not seen yet (Restate delivers a cancel when the handler next runs);
	// it is re-checked until known, and a follow-up audit event records
	// the outcome then.
	AuditPending = "pending"
	// AuditRefused: the provider or substate said no (not allowed, not in
	// a state that permits it, not found, throttled, or the execution had
	// already ended when the stop reached it); nothing was done.
	AuditRefused = "refused"
	// AuditUnknown: the call failed without the provider's answer (it was
	// unreachable, timed out, or answered an error of its own), so the
	// action may or may not have been taken; describing the execution tells.
	AuditUnknown = "unknown"
	// AuditSkipped: the tenant's execution or sub-state was no longer what
	// the caller acted on, so nothing was asked of the provider.
	AuditSkipped = "skipped"
)

// AuditOutcome is the outcome of an action whose provider call ended with
// err; nil is AuditDone only as far as the call goes: the read-back decides.
func AuditOutcome(err error) string {
	switch ErrorCode(err) {
	case "":
		return AuditDone
	case EUNAVAILABLE, EINTERNAL:
		return AuditUnknown
	}
	return AuditRefused
}

// AuditEvent records one action taken on an execution: who, why, on what
// and how it ended. Input and output are never in it.
type AuditEvent struct {
	ID             string          `json:"id"`
	Time           time.Time       `json:"time"`
	Action         ExecutionAction `json:"action"`
	Who            string          `json:"who"`
	Reason         string          `json:"reason,omitempty"`
	Kill           bool            `json:"kill,omitempty"`
	TenantID       string          `json:"tenantId"`
	Provider       Provider        `json:"provider"`
	ExecutionID    string          `json:"executionId"`
	NewExecutionID string          `json:"newExecutionId,omitempty"`
	Outcome        string          `json:"outcome"`
	ErrorCode      string          `json:"errorCode,omitempty"`
	Error          string          `json:"error,omitempty"`
	// Detail says what the outcome rests on: for pending, what substate
	// does next; for skipped, what changed.
	Detail string `json:"detail,omitempty"`
	// Settles, on a follow-up event, is the id of the audit event of the
	// pending action whose outcome this event records.
	Settles string `json:"settles,omitempty"`
	// Job and Member, on an action of a fleet job, name the job and the
	// member's 1-based position in its frozen set; the event is then on
	// the job's subject (Subject).
	Job    string `json:"job,omitempty"`
	Member int    `json:"member,omitempty"`
	// DeadLetter is the SUBSTATE_DLQ sequence a requeue acted on.
	DeadLetter uint64 `json:"deadLetter,omitempty"`
}

// Subject is the subject the event is published on: AuditSubject, with
// the job's token appended for an action of a job.
func (ev AuditEvent) Subject() string {
	s := AuditSubject(ev.Action, ev.TenantID)
	if ev.Job != "" {
		s += "." + EncodeToken(ev.Job)
	}
	return s
}

// AuditPublisher records audit events durably (SUBSTATE_AUDIT) and returns
// once the record is stored.
type AuditPublisher interface {
	PublishAudit(ctx context.Context, ev AuditEvent) error
}

// ExecutionService describes and acts on tenants' current executions,
// whichever provider runs them.
type ExecutionService interface {
	Describe(ctx context.Context, tenantID string) (ExecutionInfo, error)
	Act(ctx context.Context, req ExecutionRequest) (ExecutionResult, error)
}

// StopErrorType is the error type of an execution a stop ended: Step
// Functions' StopExecution is given it as its error, the engine records it.
const StopErrorType = "Stopped"

// StopMessage is how a stop's cause reads as the view's error message,
// whichever provider ran the execution: "Stopped: " and the cause's first
// line, or "Stopped" without a cause.
func StopMessage(cause string) string {
	for line := range strings.Lines(cause) {
		if line = strings.TrimSpace(line); line != "" {
			return StopErrorType + ": " + line
		}
	}
	return StopErrorType
}
