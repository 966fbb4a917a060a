package restate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// Operator acts on Restate invocations through the admin API:
// describe (a sys_invocation query), stop (PATCH …/cancel, or …/kill),
// retry (PATCH …/resume, for a paused or backing-off invocation) and
// restart (PATCH …/restart-as-new). Its Poll reads an invocation's row as
// the poller does (with its journal's failures where the row needs them),
// so the view shows an action's result at once.
type Operator struct {
	// Admin is the admin API client, the poller's own.
	Admin *Client
	// Columns are the sys_invocation columns Poll selects; empty means
	// DefaultColumns, as the poller's.
	Columns []string
}

var (
	_ substate.ExecutionOperator = (*Operator)(nil)
	_ substate.StatusPoller      = (*Operator)(nil)
)

// restateInvocation is what DescribeExecution reads of a sys_invocation row.
type restateInvocation struct {
	ID                string          `json:"id"`
	Target            string          `json:"target"`
	TargetHandlerName string          `json:"target_handler_name"`
	ServiceKey        *string         `json:"target_service_key"`
	Status            string          `json:"status"`
	CreatedAt         json.RawMessage `json:"created_at"`
	CompletedAt       json.RawMessage `json:"completed_at"`
	ModifiedAt        json.RawMessage `json:"modified_at"`
	CompletionResult  *string         `json:"completion_result"`
	CompletionFailure string          `json:"completion_failure"`
}

// row returns the sys_invocation row of one invocation, every column.
func (o *Operator) row(ctx context.Context, id string) (json.RawMessage, error) {
	if !validInvocationID(id) {
		return nil, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	rows, err := o.Admin.Query(ctx, "SELECT * FROM sys_invocation WHERE id = "+sqlString(id))
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, substate.Errorf(substate.ENOTFOUND, "restate: invocation %s not found (completed plain-service invocations are not kept)", id)
	}
	return rows[0], nil
}

// statusMapper maps a row as the view's events map it, for describe.
var statusMapper = mapping.New(mapping.Config{})

// DescribeExecution describes an invocation from its sys_invocation row,
// read with its journal's failures and its handler's retry policy where
// the row needs them, as the poller reads it, and mapped by the view's
// mapping: Attempts is the retry count the view shows and Error its
// message (the first line of the failure, the stack trace left out).
// Restate does not expose an invocation's input there: Input stays empty.
func (o *Operator) DescribeExecution(ctx context.Context, id string) (substate.ExecutionInfo, error) {
	raw, err := o.row(ctx, id)
	if err != nil {
		return substate.ExecutionInfo{}, err
	}
	var r restateInvocation
	if err := json.Unmarshal(raw, &r); err != nil {
		return substate.ExecutionInfo{}, substate.WrapError(substate.EINVALID, err, "decode restate row")
	}
	ev, err := statusMapper.MapRestateStatus(readFailures(ctx, o.Admin, raw))
	if err != nil {
		return substate.ExecutionInfo{}, err
	}
	info := substate.ExecutionInfo{
		Provider: substate.ProviderRestate, ExecutionID: r.ID, Workflow: r.Target, ProviderState: r.Status,
		Step: r.TargetHandlerName, StartedAt: restateTime(r.CreatedAt), Attempts: ev.RetryCount,
		Ended: r.Status == "completed", Error: ev.ErrorMessage,
	}
	if info.Ended {
		info.StoppedAt = restateTime(r.CompletedAt)
		info.ProviderState = "completed: " + deref(r.CompletionResult)
		info.Stopped = ev.Verb == substate.VerbCancelled
		info.Killed = info.Stopped && wasKilled(r.CompletionFailure)
	}
	switch {
	case slices.Contains(resumable, r.Status):
		info.Retryable = true
	case r.Status == "completed":
		info.RetryRefusal = "the invocation completed: Restate resumes only paused, suspended or backing-off invocations (restart starts it again)"
	default:
		info.RetryRefusal = "the invocation is " + r.Status + ": Restate resumes only paused, suspended or backing-off invocations"
	}
	return info, nil
}

// wasKilled reports the completion failure of a kill ("[409] killed"),
// not of a cancel ("[409] canceled").
func wasKilled(failure string) bool {
	msg, ok := strings.CutPrefix(failure, "[409]")
	return ok && strings.HasPrefix(strings.ToLower(strings.TrimSpace(msg)), "killed")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// restateTime reads a timestamp column ("2024-06-19T10:00:01.234Z" or
// epoch milliseconds); zero when it is null or unreadable.
func restateTime(v json.RawMessage) time.Time {
	var s string
	if json.Unmarshal(v, &s) == nil {
		t, _ := time.Parse(time.RFC3339Nano, s)
		return t
	}
	var ms int64
	if json.Unmarshal(v, &ms) == nil && ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	return time.Time{}
}

// StopExecution cancels the invocation (its handler's compensations run),
// or kills it at once with Kill. Restate keeps no cause: the audit event
// holds it.
func (o *Operator) StopExecution(ctx context.Context, id string, opts substate.StopOptions) error {
	action := "cancel"
	if opts.Kill {
		action = "kill"
	}
	_, err := o.Admin.Patch(ctx, id, action)
	return err
}

// RetryExecution resumes a paused, suspended or backing-off invocation.
func (o *Operator) RetryExecution(ctx context.Context, id string) error {
	_, err := o.Admin.Patch(ctx, id, "resume")
	return err
}

// RestartExecution restarts a completed invocation as a new one with the
// same input (restart-as-new) and returns the new invocation's id.
func (o *Operator) RestartExecution(ctx context.Context, id string) (string, error) {
	a, err := o.Admin.Patch(ctx, id, "restart-as-new")
	if err != nil {
		return "", err
	}
	var out struct {
		NewInvocationID string `json:"new_invocation_id"`
	}
	if err := json.Unmarshal(a.Body, &out); err != nil || out.NewInvocationID == "" {
		return "", substate.Errorf(substate.EUNAVAILABLE, "restate: restart-as-new answered %.200q without a new invocation id", a.Body)
	}
	return out.NewInvocationID, nil
}

// Poll returns the invocation's row, with the columns the poller selects,
// as the raw event the poller would publish.
func (o *Operator) Poll(ctx context.Context, id string, _ bool) (substate.RawEvent, error) {
	if !validInvocationID(id) {
		return substate.RawEvent{}, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	columns := o.Columns
	if len(columns) == 0 {
		columns = DefaultColumns
	}
	rows, err := o.Admin.Query(ctx, restateQuery(columns, []string{id}))
	if err != nil {
		return substate.RawEvent{}, err
	}
	if len(rows) == 0 {
		return substate.RawEvent{}, substate.Errorf(substate.ENOTFOUND, "restate: invocation %s not found", id)
	}
	f, err := factsOf(rows[0])
	if err != nil {
		return substate.RawEvent{}, err
	}
	row := readFailures(ctx, o.Admin, rows[0])
	return restateRaw(f.ID, f.ModifiedAt, row), nil
}
