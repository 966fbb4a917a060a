package restate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Operator acts on Restate invocations through the admin API:
// describe (a sys_invocation query), stop (PATCH …/cancel, or …/kill),
// retry (PATCH …/resume, for a paused or backing-off invocation) and
// restart (PATCH …/restart-as-new). Its Poll reads an invocation's row as
// the poller does, so the view shows an action's result at once.
type Operator struct {
	// Admin is the admin API client: its URL, Token, Client and Metrics
	// are used; it need not run.
	Admin *Poller
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
	RetryCount        int             `json:"retry_count"`
	LastFailure       *string         `json:"last_failure"`
	CompletionResult  *string         `json:"completion_result"`
	CompletionFailure *string         `json:"completion_failure"`
}

// row returns the sys_invocation row of one invocation, every column.
func (o *Operator) row(ctx context.Context, id string) (json.RawMessage, error) {
	if !validInvocationID(id) {
		return nil, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	rows, err := o.Admin.query(ctx, "SELECT * FROM sys_invocation WHERE id = "+sqlString(id))
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, substate.Errorf(substate.ENOTFOUND, "restate: invocation %s not found (completed plain-service invocations are not kept)", id)
	}
	return rows[0], nil
}

// DescribeExecution describes an invocation from its sys_invocation row.
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
	info := substate.ExecutionInfo{
		Provider: substate.ProviderRestate, ExecutionID: r.ID, Workflow: r.Target, ProviderState: r.Status,
		Step: r.TargetHandlerName, StartedAt: restateTime(r.CreatedAt), Attempts: r.RetryCount,
		Ended: r.Status == "completed",
	}
	if info.Ended {
		info.StoppedAt = restateTime(r.CompletedAt)
		info.ProviderState = "completed: " + deref(r.CompletionResult)
		info.Error = deref(r.CompletionFailure)
	} else {
		info.Error = deref(r.LastFailure)
	}
	switch r.Status {
	case "paused", "backing-off", "suspended":
		info.Retryable = true
	case "completed":
		info.RetryRefusal = "the invocation completed: Restate resumes only paused, suspended or backing-off invocations (restart starts it again)"
	default:
		info.RetryRefusal = "the invocation is " + r.Status + ": Restate resumes only paused, suspended or backing-off invocations"
	}
	return info, nil
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
	_, err := o.patch(ctx, id, action)
	return err
}

// RetryExecution resumes a paused, suspended or backing-off invocation.
func (o *Operator) RetryExecution(ctx context.Context, id string) error {
	_, err := o.patch(ctx, id, "resume")
	return err
}

// RestartExecution restarts a completed invocation as a new one with the
// same input (restart-as-new) and returns the new invocation's id.
func (o *Operator) RestartExecution(ctx context.Context, id string) (string, error) {
	b, err := o.patch(ctx, id, "restart-as-new")
	if err != nil {
		return "", err
	}
	var out struct {
		NewInvocationID string `json:"new_invocation_id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.NewInvocationID == "" {
		return "", substate.Errorf(substate.EUNAVAILABLE, "restate: restart-as-new answered %q without a new invocation id", b)
	}
	return out.NewInvocationID, nil
}

// Poll returns the invocation's row, with the columns the poller selects,
// as the raw event the poller would publish.
func (o *Operator) Poll(ctx context.Context, id string, _ bool) (substate.RawEvent, error) {
	if !validInvocationID(id) {
		return substate.RawEvent{}, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	columns := o.Admin.Columns
	if len(columns) == 0 {
		columns = DefaultColumns
	}
	rows, err := o.Admin.query(ctx, restateQuery(columns, []string{id}))
	if err != nil {
		return substate.RawEvent{}, err
	}
	if len(rows) == 0 {
		return substate.RawEvent{}, substate.Errorf(substate.ENOTFOUND, "restate: invocation %s not found", id)
	}
	rid, modifiedAt, _, err := restateRowID(rows[0])
	if err != nil {
		return substate.RawEvent{}, err
	}
	return restateRaw(rid, modifiedAt, rows[0]), nil
}

// patch sends PATCH /invocations/{id}/{action} and returns the answer's
// body. A 409 (already completed, not paused) is ECONFLICT with Restate's
// message; 404 is ENOTFOUND.
func (o *Operator) patch(ctx context.Context, id, action string) ([]byte, error) {
	if !validInvocationID(id) {
		return nil, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	u := strings.TrimRight(o.Admin.URL, "/") + "/invocations/" + url.PathEscape(id) + "/" + action
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, nil)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate %s: bad admin url %q", action, o.Admin.URL)
	}
	req.Header.Set("Accept", "application/json")
	if o.Admin.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Admin.Token)
	}
	o.Admin.Metrics.CountCall(substate.ProviderRestate, action)
	client := o.Admin.Client
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "restate %s: admin api unreachable", action)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return b, nil
	}
	err = restateError(resp.StatusCode, b)
	var ae restateAnswerError
	msg := strings.TrimSpace(string(b))
	if errors.As(err, &ae) {
		msg = ae.message
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		return nil, substate.WrapError(substate.ECONFLICT, err, "restate %s of %s refused: %s", action, id, msg)
	case http.StatusNotFound:
		return nil, substate.WrapError(substate.ENOTFOUND, err, "restate %s: invocation %s not found", action, id)
	}
	return nil, substate.WrapError(substate.ErrorCode(err), err, "restate %s of %s: %s", action, id, msg)
}
