package restate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/testkit/pipelinetest"
	"github.com/substatehq/substate/testkit/restatetest"
)

// realRestate is a real Restate server feeding the pipeline through the
// admin-API poller.
type realRestate struct {
	*pipelinetest.Pipeline
	rs     *restatetest.Server
	poller *restate.Poller
	// resumedAfter holds, by invocation, the attempts it had made when it
	// was last resumed: Restate's retry_count starts again at 1 then.
	resumedAfter map[string]int
}

func newRealRestate(t *testing.T) *realRestate {
	t.Helper()
	return newRealRestateRules(t)
}

// newRealRestateRules is newRealRestate with the normalizer's tenant
// rules, when given, instead of pipelinetest.Mapper's.
func newRealRestateRules(t *testing.T, rules ...string) *realRestate {
	t.Helper()
	rs := restatetest.Start(t)
	parsed, err := mapping.ParseTenantRules(rules...)
	if err != nil {
		t.Fatal(err)
	}
	p := pipelinetest.NewWith(t, func(n *consumers.Normalizer) {
		if len(parsed) > 0 {
			n.Mapper = mapping.New(mapping.Config{Tenants: parsed})
		}
	})
	poller := restate.NewPoller(restate.NewClient(rs.AdminURL), p.View, p.Pub)
	poller.Services, poller.DeadLetters, poller.QPS = []string{"Provision", "Notify"}, p.Pub, 0
	return &realRestate{Pipeline: p, rs: rs, poller: poller, resumedAfter: map[string]int{}}
}

// resume resumes a paused invocation, noting the attempts it made so far
// (all failed: it is paused).
func (r *realRestate) resume(t *testing.T, id string) {
	t.Helper()
	r.resumedAfter[id] = r.rs.Attempts(t, id)
	r.rs.Resume(t, id)
}

// sweep runs one poll and waits until the pipeline applied what it found.
func (r *realRestate) sweep(t *testing.T) reconcile.SweepResult {
	t.Helper()
	res, err := r.poller.Sweep(context.Background())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	r.Settle(t)
	return res
}

// rowState is what a sys_invocation row says that the view shows.
type rowState struct {
	Status, Result, Failure, CompletionFailure string
	RetryCount                                 int
	HasRetryCount                              bool
	NextRetryAt                                string // as the row has it, "" for none
}

func rowStateOf(row map[string]any) rowState {
	s := rowState{}
	s.Status, _ = row["status"].(string)
	s.Result, _ = row["completion_result"].(string)
	s.Failure, _ = row["last_failure"].(string)
	s.CompletionFailure, _ = row["completion_failure"].(string)
	if n, ok := row["retry_count"].(float64); ok {
		s.RetryCount, s.HasRetryCount = int(n), true
	}
	s.NextRetryAt, _ = row["next_retry_at"].(string)
	return s
}

// observe sweeps until the invocation's row is the same just before and
// just after the sweep, and returns that row and the tenant's view then:
// the view against what sys_invocation said at that moment.
func (r *realRestate) observe(t *testing.T, id, tenant string) (rowState, substate.TenantView) {
	t.Helper()
	for range 50 {
		before := rowStateOf(r.rs.Row(t, id))
		r.sweep(t)
		after := rowStateOf(r.rs.Row(t, id))
		if before == after {
			return after, r.Tenant(t, tenant)
		}
	}
	t.Fatalf("invocation %s changed during every one of 50 sweeps", id)
	return rowState{}, substate.TenantView{}
}

// expect is what a view must show for a row, given the retry count the
// view showed before (a count never goes down within an invocation).
type expect struct {
	subState substate.SubState
	retries  int
	err      string // "" for none, else the exact message
	// nextRetry, for a backing-off row, is when Restate says it runs the
	// next attempt (its next_retry_at); zero when the row says nothing.
	nextRetry time.Time
	// orUnchanged, when set, is the view before the row: a ready row
	// without retry_count between two attempts shares the modified_at of
	// the attempt before it and ranks below it, so the view may keep it.
	orUnchanged *substate.TenantView
}

// expectOf derives the view a row calls for, independently of the mapping
// code: Restate's retry_count is the attempt number since the last resume
// (before is the attempts made until then), the error is the failure's
// first line without the "[code Name]" prefix.
func expectOf(s rowState, prevRetries, before int) expect {
	msg := func(failure string) string {
		line, _, _ := strings.Cut(failure, "\n")
		if i := strings.Index(line, "] "); strings.HasPrefix(line, "[") && i > 0 {
			line = line[i+2:]
		}
		return line
	}
	switch s.Status {
	case "backing-off":
		next, _ := time.Parse(time.RFC3339Nano, s.NextRetryAt)
		return expect{subState: substate.StateBackingOff, retries: max(prevRetries, before+s.RetryCount), err: msg(s.Failure), nextRetry: next}
	case "running", "ready":
		n := prevRetries
		if s.HasRetryCount {
			n = max(n, before+s.RetryCount-1)
		}
		return expect{subState: substate.StateRunning, retries: n}
	case "suspended", "pending", "scheduled":
		return expect{subState: substate.StateWaiting, retries: prevRetries}
	case "completed":
		if s.Result == "success" {
			return expect{subState: substate.StateSucceeded}
		}
		return expect{subState: substate.StateFailed, retries: prevRetries, err: msg(s.CompletionFailure)}
	}
	return expect{subState: substate.SubState("unexpected status " + s.Status)}
}

// readyBetweenAttempts returns e allowing the view to stay as prev when the
// row is a ready row without retry_count after an attempt of the same
// invocation.
func (e expect) readyBetweenAttempts(s rowState, prev substate.TenantView, id string) expect {
	attempted := prev.WorkflowSubState == substate.StateBackingOff || prev.WorkflowSubState == substate.StateRunning
	if s.Status == "ready" && !s.HasRetryCount && attempted && prev.WorkflowExecutionID == id {
		e.orUnchanged = &prev
	}
	return e
}

func (e expect) check(t *testing.T, what string, v substate.TenantView) {
	t.Helper()
	if p := e.orUnchanged; p != nil && v.WorkflowSubState == p.WorkflowSubState && v.WorkflowRetryCount == p.WorkflowRetryCount && v.WorkflowErrorMessage == p.WorkflowErrorMessage {
		return
	}
	if v.WorkflowSubState != e.subState || v.WorkflowRetryCount != e.retries || v.WorkflowErrorMessage != e.err {
		t.Fatalf("%s: view = %s, retries %d, error %q; want %s, %d, %q",
			what, v.WorkflowSubState, v.WorkflowRetryCount, v.WorkflowErrorMessage, e.subState, e.retries, e.err)
	}
	if !e.nextRetry.IsZero() && !v.WorkflowNextRetryAt.Equal(e.nextRetry) {
		t.Fatalf("%s: view's next retry = %v; want the row's next_retry_at %v", what, v.WorkflowNextRetryAt, e.nextRetry)
	}
	if strings.Contains(v.WorkflowErrorMessage, "\n") || strings.Contains(v.WorkflowErrorMessage, "    at ") {
		t.Fatalf("%s: the error carries a stack trace: %q", what, v.WorkflowErrorMessage)
	}
}

// follow observes an invocation until done accepts its row, checking the
// view against every row observed, and returns the statuses seen in order.
func (r *realRestate) follow(t *testing.T, id, tenant string, done func(rowState) bool) []string {
	t.Helper()
	var seen []string
	retries := 0
	prev, _ := r.View.Tenant(context.Background(), tenant)
	if prev.WorkflowExecutionID == id {
		retries = prev.WorkflowRetryCount
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		s, v := r.observe(t, id, tenant)
		want := expectOf(s, retries, r.resumedAfter[id]).readyBetweenAttempts(s, prev, id)
		if s.Status == "paused" {
			want = r.pausedExpect(t, id, retries)
		}
		want.check(t, fmt.Sprintf("%s row %s", tenant, s), v)
		retries, prev = v.WorkflowRetryCount, v
		label := s.Status
		if s.Status == "backing-off" {
			label = fmt.Sprintf("backing-off/%d", s.RetryCount)
		}
		if len(seen) == 0 || seen[len(seen)-1] != label {
			seen = append(seen, label)
		}
		if done(s) {
			return seen
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not done within 90 s; statuses seen %v", tenant, seen)
	return nil
}

// applyView puts a tenant's running Restate invocation into the view, as an
// earlier event would have.
func (r *realRestate) applyView(t *testing.T, tenant, invocation string) {
	t.Helper()
	row, _ := json.Marshal(map[string]any{
		"id": invocation, "target": "Provision/" + tenant + "/ok", "target_service_name": "Provision",
		"target_service_key": tenant, "status": "running", "created_at": time.Now().UTC().Format(time.RFC3339Nano),
		"modified_at": time.Now().UTC().Format(time.RFC3339Nano),
	})
	r.Publish(t, substate.RawEvent{Kind: substate.RawRestate, ID: "seed-" + tenant, Body: row})
	r.WaitTenant(t, tenant, "running", func(v substate.TenantView) bool { return v.WorkflowExecutionID == invocation })
}

// pausedExpect is the view a paused invocation calls for: error, with
// every attempt the test service saw (all failed, or it would not be
// paused) and the newest failure's message, read straight from
// sys_journal_events.
func (r *realRestate) pausedExpect(t *testing.T, id string, prevRetries int) expect {
	t.Helper()
	rows := r.rs.Query(t, "SELECT event_type, event_json FROM sys_journal_events WHERE id = '"+id+
		"' AND event_type IN ('TransientError', 'Paused') ORDER BY appended_at")
	msg := ""
	for _, row := range rows {
		var e struct {
			EventJSON string `json:"event_json"`
		}
		var ev struct {
			Message     string `json:"error_message"`
			LastFailure *struct {
				Message string `json:"error_message"`
			} `json:"last_failure"`
		}
		if json.Unmarshal(row, &e) != nil || json.Unmarshal([]byte(e.EventJSON), &ev) != nil {
			t.Fatalf("journal row %s", row)
		}
		msg = ev.Message
		if ev.LastFailure != nil {
			msg = ev.LastFailure.Message
		}
	}
	return expect{subState: substate.StateError, retries: max(prevRetries, r.rs.Attempts(t, id)), err: msg}
}

// String shows a row's state on one line.
func (s rowState) String() string {
	failure, _, _ := strings.Cut(s.Failure+s.CompletionFailure, "\n")
	return fmt.Sprintf("{%s retry_count=%d %s failure=%q}", s.Status, s.RetryCount, s.Result, failure)
}
