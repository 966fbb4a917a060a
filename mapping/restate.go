package mapping

import (
	"bytes"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// restateRow is one sys_invocation row as the admin API's /query returns it
// with Accept: application/json. Only the columns mapping reads are declared.
type restateRow struct {
	ID                string      `json:"id"`
	Target            string      `json:"target"`
	TargetServiceName string      `json:"target_service_name"`
	TargetServiceKey  string      `json:"target_service_key"`
	Status            string      `json:"status"`
	CreatedAt         restateTime `json:"created_at"`
	ModifiedAt        restateTime `json:"modified_at"`
	RunningAt         restateTime `json:"running_at"`
	CompletedAt       restateTime `json:"completed_at"`
	NextRetryAt       restateTime `json:"next_retry_at"`
	RetryCount        *int        `json:"retry_count"`
	LastFailure       string      `json:"last_failure"`
	LastFailureCode   string      `json:"last_failure_error_code"`
	CompletionResult  string      `json:"completion_result"`
	CompletionFailure string      `json:"completion_failure"`
}

// MapRestate maps sys_invocation rows, a single row object or {"rows":[…]},
// to one canonical event per row.
func (m *Mapper) MapRestate(body []byte) ([]substate.EventData, error) {
	rows, err := decodeRestateRows(body)
	if err != nil {
		return nil, err
	}
	out := make([]substate.EventData, 0, len(rows))
	for i := range rows {
		ev, err := m.mapRestateRow(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// restatePayload is either shape of a Restate payload in one pass: a page
// {"rows":[…]} as the admin API answers, or a single row.
type restatePayload struct {
	Rows *[]restateRow `json:"rows"`
	restateRow
}

func decodeRestateRows(body []byte) ([]restateRow, error) {
	var p restatePayload
	if err := decode(bytes.TrimSpace(body), &p); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "decode restate row")
	}
	if p.Rows == nil {
		return []restateRow{p.restateRow}, nil
	}
	if len(*p.Rows) == 0 {
		return nil, substate.Errorf(substate.EINVALID, "restate payload has no rows")
	}
	return *p.Rows, nil
}

func (m *Mapper) mapRestateRow(r *restateRow) (substate.EventData, error) {
	if r.ID == "" || r.Status == "" {
		return substate.EventData{}, substate.Errorf(substate.EINVALID, "restate row %q has no id or status", r.ID)
	}
	occurred := firstSet(r.ModifiedAt.Time, r.CompletedAt.Time, r.RunningAt.Time, r.CreatedAt.Time)
	if occurred.IsZero() {
		return substate.EventData{}, substate.Errorf(substate.EINVALID, "restate row %q has no modified_at", r.ID)
	}
	out := substate.EventData{
		Provider:           substate.ProviderRestate,
		ExecutionID:        r.ID,
		Workflow:           r.TargetServiceName,
		ProviderState:      r.Status,
		OccurredAt:         occurred,
		ExecutionStartedAt: r.CreatedAt.Time,
		Revision:           substate.Revision(max(occurred.UnixMilli(), 0)),
	}
	if out.Workflow == "" {
		out.Workflow = r.Target
	}
	if r.RetryCount != nil {
		out.RetryCount, out.RetryCountKnown = max(*r.RetryCount-1, 0), true
	}
	state, cond := restateState(r, occurred)
	apply(&out, m.resolve(substate.ProviderRestate, state, cond))
	restateError(&out, r)
	src := tenantSource{execution: r.ID, name: r.TargetServiceKey, serviceKey: r.TargetServiceKey}
	tenant, err := m.tenants.resolve(&src)
	if err != nil {
		return substate.EventData{}, err
	}
	out.TenantID = tenant
	return out, nil
}

// restateState returns the native state and condition to look up for a
// row: a completed invocation is told apart by its completion result, and
// an unknown result is looked up as the unknown state "completed/<result>".
// A running row with a retry scheduled after it (next_retry_at later than
// the row's time) is backing off whatever its status says.
func restateState(r *restateRow, occurred time.Time) (string, Condition) {
	switch r.Status {
	case "running", "ready", "active":
		if r.NextRetryAt.After(occurred) {
			return r.Status, CondRetryScheduled
		}
		return r.Status, CondNone
	case "completed":
	default:
		return r.Status, CondNone
	}
	result := r.CompletionResult
	if result == "" && r.CompletionFailure != "" {
		result = "failure"
	}
	switch result {
	case "success", "":
		return r.Status, CondCompletedSuccess
	case "failure":
		if killed(r.CompletionFailure) {
			return r.Status, CondCompletedKilled
		}
		return r.Status, CondCompletedFailure
	}
	return r.Status + "/" + result, CondNone
}

// killed reports a completion failure caused by a kill or cancellation
// ("[409] killed", "[409] canceled").
func killed(failure string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(failure), "[409]")
	if !ok {
		return false
	}
	rest = strings.ToLower(strings.TrimSpace(rest))
	return strings.HasPrefix(rest, "killed") || strings.HasPrefix(rest, "cancel")
}

// restateError fills the error of a row: the completion failure of a failed
// invocation, else the last attempt's failure.
func restateError(out *substate.EventData, r *restateRow) {
	switch {
	case out.SubState == substate.StateSucceeded:
		return
	case r.CompletionFailure != "":
		out.ErrorMessage, out.ErrorType = r.CompletionFailure, failureCode(r.CompletionFailure)
	case r.LastFailure != "":
		out.ErrorMessage, out.ErrorType = r.LastFailure, r.LastFailureCode
		if out.ErrorType == "" {
			out.ErrorType = failureCode(r.LastFailure)
		}
	}
}

// failureCode returns the code of a Restate failure "[402] card declined".
func failureCode(failure string) string {
	rest, ok := strings.CutPrefix(failure, "[")
	if !ok {
		return ""
	}
	code, _, ok := strings.Cut(rest, "]")
	if !ok {
		return ""
	}
	return code
}
