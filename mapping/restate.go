package mapping

import (
	"bytes"
	"cmp"
	"errors"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
)

// restateRow is one sys_invocation row as the admin API's /query returns it
// with Accept: application/json. Only the columns mapping reads are declared.
// The poller may add the invocation's failure events from
// sys_journal_events (see restateJournal), and, to the row of an
// invocation of a keyless service, its input (see restateInput).
type restateRow struct {
	ID                string         `json:"id"`
	Target            string         `json:"target"`
	TargetServiceName string         `json:"target_service_name"`
	TargetServiceKey  string         `json:"target_service_key"`
	IdempotencyKey    string         `json:"idempotency_key"`
	Input             jsontext.Value `json:"input"`
	Status            string         `json:"status"`
	CreatedAt         restateTime    `json:"created_at"`
	ModifiedAt        restateTime    `json:"modified_at"`
	RunningAt         restateTime    `json:"running_at"`
	CompletedAt       restateTime    `json:"completed_at"`
	NextRetryAt       restateTime    `json:"next_retry_at"`
	RetryCount        *int           `json:"retry_count"`
	LastFailure       string         `json:"last_failure"`
	LastFailureCode   string         `json:"last_failure_error_code"`
	CompletionResult  string         `json:"completion_result"`
	CompletionFailure string         `json:"completion_failure"`
	restateJournal
}

// MapRestate maps sys_invocation rows, a single row object or {"rows":[…]},
// to one canonical event per row.
func (m *Mapper) MapRestate(body []byte) ([]substate.EventData, error) {
	return m.mapRestate(body, "")
}

// mapRestate maps rows as MapRestate does; stopCause, when substate
// published the rows after stopping their invocation, becomes the error of
// a row that Restate completed as cancelled or killed.
func (m *Mapper) mapRestate(body []byte, stopCause string) ([]substate.EventData, error) {
	rows, err := decodeRestateRows(body)
	if err != nil {
		return nil, err
	}
	out := make([]substate.EventData, 0, len(rows))
	for i := range rows {
		ev, err := m.mapRestateRow(&rows[i])
		if err != nil {
			return nil, aboutRows(err, len(rows))
		}
		withStopCause(&ev, &rows[i], stopCause)
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
	out, err := m.restateStatus(r)
	if err != nil {
		return substate.EventData{}, err
	}
	src := tenantSource{provider: substate.ProviderRestate, execution: r.ID, name: r.name(),
		serviceKey: r.TargetServiceKey, input: restateInput(r.Input)}
	tenant, err := m.tenants.resolve(&src)
	if err != nil {
		return substate.EventData{}, err
	}
	out.TenantID = tenant
	return out, nil
}

// name is what name: tenant rules match: the service key, or for an
// invocation of a keyless service its idempotency_key (the caller's
// idempotency key; Restate 1.7 fills in a ULID when the caller sent none).
func (r *restateRow) name() string {
	return cmp.Or(r.TargetServiceKey, r.IdempotencyKey)
}

// restateInput returns the input JSON text attached to a row: the value
// itself, or the text of a JSON string (as Step Functions gives its
// input); nil when there is none.
func restateInput(v jsontext.Value) []byte {
	switch v.Kind() {
	case '{', '[', '0', 't', 'f':
		return v
	case '"':
		s, err := decodeString(v)
		if err != nil || s == "" {
			return nil
		}
		return []byte(s)
	}
	return nil
}

// aboutRows returns the error of one of n rows of a payload: a tenant
// that cannot be resolved names its execution only when the payload holds
// that one row, so that a payload of several invocations' rows is always
// dead-lettered whole.
func aboutRows(err error, n int) error {
	var u *substate.UnresolvedTenant
	if n > 1 && errors.As(err, &u) {
		return u.Err
	}
	return err
}

// restateStatus maps a row to its canonical event, all but the tenant.
func (m *Mapper) restateStatus(r *restateRow) (substate.EventData, error) {
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
	}
	if out.Workflow == "" {
		out.Workflow = r.Target
	}
	r.bound()
	state, cond := restateState(r, occurred)
	apply(&out, m.resolve(substate.ProviderRestate, state, cond))
	if out.SubState == substate.StateBackingOff {
		out.NextRetryAt = r.NextRetryAt.Time // when the scheduled attempt starts
	}
	attempt := 0
	if r.RetryCount != nil {
		attempt = max(*r.RetryCount, 0)
	}
	out.Revision = RestateRevision(occurred, attempt, restateRank(r.Status, cond))
	if r.Status != "paused" && !r.ModifiedAt.IsZero() {
		r.until(r.ModifiedAt.Time)
	}
	restateRetries(&out, r, attempt)
	restateError(&out, r)
	return out, nil
}

// MapRestateStatus maps one sys_invocation row (with what the poller
// attaches to it) as the view's events map it, without resolving its
// tenant: what describing an invocation shows, so that it agrees with the
// view.
func (m *Mapper) MapRestateStatus(body []byte) (substate.EventData, error) {
	rows, err := decodeRestateRows(body)
	if err != nil {
		return substate.EventData{}, err
	}
	return m.restateStatus(&rows[0])
}

// maxRestateCount bounds each count a row carries (retry_count, the
// journal's event count, the policy's max_attempts): a retry count summed
// from them, over at most a few dozen spells, then cannot overflow,
// whatever a sender wrote there.
const maxRestateCount = 1 << 31

// bound caps the row's counts at maxRestateCount.
func (r *restateRow) bound() {
	for _, n := range []*int{r.RetryCount, r.JournalEventCount} {
		if n != nil {
			*n = min(*n, maxRestateCount)
		}
	}
	if p := r.RetryPolicy; p != nil && p.MaxAttempts != nil {
		*p.MaxAttempts = min(*p.MaxAttempts, maxRestateCount)
	}
}

// restateRank is the rank of a status among the rows of one modified_at.
func restateRank(status string, cond Condition) int {
	switch {
	case cond == CondRetryScheduled || status == "backing-off":
		return RestateRankBackingOff
	case status == "running" || status == "active":
		return RestateRankRunning
	case status == "pending" || status == "scheduled" || status == "ready":
		return RestateRankQueued
	}
	return RestateRankSettled
}

// restateRetries fills the retry count (the failed attempts followed by,
// or waiting for, a retry, over the whole invocation) from the row's
// retry_count, which counts the attempts of the current spell: backing off
// after attempt n, n attempts failed; running attempt n, n-1 did. The
// journal the poller attaches adds the attempts of the spells a pause
// ended (retry_count starts again at 1 after a resume). A paused row has
// no retry_count when its retry policy paused it: its spell's attempts
// come from the journal and the policy; paused by hand, it keeps it. A
// completed row has none either: a failed one counts its last spell's
// retried failures from the journal (see endedAttempts); without the
// journal its count is not known and the view keeps the one it has.
func restateRetries(out *substate.EventData, r *restateRow, attempt int) {
	paused := r.Status == "paused"
	before, spell := 0, 0
	if r.hasJournal() {
		before, spell = r.failedBefore(paused)
	}
	switch {
	case paused && r.RetryCount != nil:
		out.RetryCount, out.RetryCountKnown = before+attempt, true
	case paused && r.hasJournal():
		out.RetryCount, out.RetryCountKnown = before+r.pausedAttempts(spell), true
	case r.RetryCount != nil && out.SubState == substate.StateBackingOff:
		out.RetryCount, out.RetryCountKnown = before+attempt, true
	case r.RetryCount != nil && out.SubState == substate.StateRunning:
		out.RetryCount, out.RetryCountKnown = before+max(attempt-1, 0), true
	case r.Status == "completed" && r.hasJournal() && out.SubState == substate.StateFailed:
		_, msg := restateFailure(r.CompletionFailure)
		out.RetryCount, out.RetryCountKnown = before+r.endedAttempts(spell, msg), true
	case (before > 0 || r.Status == "ready") && (out.SubState == substate.StateRunning || out.SubState == substate.StateBackingOff):
		// No attempt in flight (a ready row, between two attempts, has no
		// retry_count): no failure since the spells before, if any. Known,
		// so that the view does not count the coming attempt as a retry.
		out.RetryCount, out.RetryCountKnown = before, true
	}
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

// withStopCause makes the cause substate stopped an invocation for, as
// every provider words it (substate.StopMessage), the error of its
// cancelled or killed row, at a revision above the same row
// without it (RestateStopCauseRevision). Restate's own failure
// text stays in the raw evidence.
func withStopCause(ev *substate.EventData, r *restateRow, cause string) {
	cause = strings.TrimSpace(cause)
	if cause == "" || r.Status != "completed" || !killed(r.CompletionFailure) {
		return
	}
	ev.ErrorMessage = substate.StopMessage(cause)
	ev.Revision = RestateStopCauseRevision(ev.OccurredAt)
}

// killed reports a completion failure caused by a kill or cancellation
// ("[409] killed", "[409] canceled").
func killed(failure string) bool {
	code, msg := restateFailure(failure)
	if code != "409" {
		return false
	}
	msg = strings.ToLower(msg)
	return strings.HasPrefix(msg, "killed") || strings.HasPrefix(msg, "cancel")
}

// restateError fills the error of a row: the completion failure of a failed
// invocation, else the last attempt's failure, else (a paused row) the last
// failure in the journal. The message is the human one: the first line,
// without Restate's "[code Name]" prefix; the stack trace that follows it
// stays in the raw evidence.
func restateError(out *substate.EventData, r *restateRow) {
	switch {
	case out.SubState == substate.StateSucceeded:
		return
	case r.CompletionFailure != "":
		out.ErrorType, out.ErrorMessage = restateFailure(r.CompletionFailure)
	case r.LastFailure != "":
		out.ErrorType, out.ErrorMessage = restateFailure(r.LastFailure)
		if r.LastFailureCode != "" {
			out.ErrorType = r.LastFailureCode
		}
	case r.Status == "paused" && r.hasJournal():
		out.ErrorType, out.ErrorMessage = r.lastFailure()
	}
}

// restateFailure splits a Restate failure text, "[500 Internal] message"
// followed by a stack trace on the next lines, into its code ("500") and
// its message's first line. A text without the prefix is all message.
func restateFailure(failure string) (code, message string) {
	s := strings.TrimSpace(failure)
	if rest, ok := strings.CutPrefix(s, "["); ok {
		if head, tail, ok := strings.Cut(rest, "]"); ok {
			code, _, _ = strings.Cut(head, " ")
			s = strings.TrimSpace(tail)
		}
	}
	return code, firstLine(s)
}
