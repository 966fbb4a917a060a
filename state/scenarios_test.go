package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// TestWorkflowExecutionStatus holds one test per scenario of the workflow
// execution status specification, named after it. What the specification
// asks of the reconciler's stored fields is asked here of the view the
// reconciler's (and every other source's) events are applied to.
func TestWorkflowExecutionStatus(t *testing.T) {
	t.Run("Reconciler extracts enriched status from workflow providers", testExtract)
	t.Run("Tenant model includes workflow execution status fields", testModel)
	t.Run("Reconciler only updates tenant when workflow status changes", testDirtyCheck)
	t.Run("Workflow execution status fields are cleared when execution completes", testCompletion)
	t.Run("Workflow execution status is queryable via repository", testQueries)
	t.Run("Workflow status updates are logged", testLogs)
}

func testExtract(t *testing.T) {
	t.Run("Extract sub-state from execution status", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).apply(ev("t", "a", backingOff, 1, native("RUNNING"), provider(substate.ProviderStepFunctions)))
		v := mustTenant(t, db, "t")
		if v.WorkflowSubState != backingOff || v.WorkflowVerb != substate.VerbRetrying || v.WorkflowStatus != substate.StatusRunning {
			t.Errorf("view = %+v, want backing-off, retrying, running", v)
		}
		if v.Provider != substate.ProviderStepFunctions || v.ProviderState != "RUNNING" {
			t.Errorf("provider = %q %q, want stepfunctions RUNNING", v.Provider, v.ProviderState)
		}
	})
	t.Run("Extract retry count from execution metadata", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).apply(ev("t", "a", running, 1, retries(4)))
		if got := mustTenant(t, db, "t").WorkflowRetryCount; got != 4 {
			t.Errorf("retry count = %d, want 4", got)
		}
	})
	t.Run("Extract error message from failed executions", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).apply(ev("t", "a", failed, 1, failure("card declined")))
		if got := mustTenant(t, db, "t").WorkflowErrorMessage; got != "card declined" {
			t.Errorf("error message = %q, want card declined", got)
		}
	})
	t.Run("Clear error message on successful retry", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).each(ev("t", "a", running, 1), ev("t", "a", errored, 2, failure("timeout")), ev("t", "a", running, 3))
		if got, want := statusOf(mustTenant(t, db, "t")), (status{running, "a", 1, ""}); got != want {
			t.Errorf("status = %v, want %v", got, want)
		}
	})
}

func testModel(t *testing.T) {
	db := openDB(t)
	newStream(t, db).apply(ev("t", "a", running, 1))
	b, err := json.Marshal(mustTenant(t, db, "t"))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	t.Run("Tenant struct includes WorkflowSubState", func(t *testing.T) {
		if got := fields["workflowSubState"]; got != "running" {
			t.Errorf("workflowSubState = %v, want running", got)
		}
		var zero map[string]any
		b, _ := json.Marshal(substate.TenantView{})
		json.Unmarshal(b, &zero)
		if got := zero["workflowSubState"]; got != "" {
			t.Errorf("unset workflowSubState = %#v, want the empty string", got)
		}
	})
	t.Run("Tenant struct includes WorkflowRetryCount", func(t *testing.T) {
		if got := fields["workflowRetryCount"]; got != 0.0 {
			t.Errorf("workflowRetryCount of a first execution = %#v, want 0", got)
		}
	})
	t.Run("Tenant struct includes WorkflowErrorMessage", func(t *testing.T) {
		if got := fields["workflowErrorMessage"]; got != "" {
			t.Errorf("workflowErrorMessage without an error = %#v, want the empty string", got)
		}
	})
}

func testDirtyCheck(t *testing.T) {
	t.Run("Skip update when sub-state unchanged", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", running, 1))
		res := s.apply(ev("t", "a", running, 2), ev("t", "a", running, 3, native("active")))
		if res.Committed || db.Stats().Commits != 1 || res.Unchanged != 2 {
			t.Errorf("result %+v, stats %+v: want no write for an unchanged sub-state", res, db.Stats())
		}
	})
	t.Run("Update when sub-state changes", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", running, 1))
		if res := s.apply(ev("t", "a", waiting, 2)); !res.Committed {
			t.Errorf("result %+v, want a commit", res)
		}
		reopen(t, db)
		if got := mustTenant(t, db, "t").WorkflowSubState; got != waiting {
			t.Errorf("persisted sub-state = %q, want waiting", got)
		}
	})
	t.Run("Update when retry count changes", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", backingOff, 1, retries(1), failure("x")))
		if res := s.apply(ev("t", "a", backingOff, 2, retries(2), failure("x"))); !res.Committed {
			t.Errorf("result %+v, want a commit", res)
		}
		reopen(t, db)
		if got := mustTenant(t, db, "t").WorkflowRetryCount; got != 2 {
			t.Errorf("persisted retry count = %d, want 2", got)
		}
	})
	t.Run("Update when error message changes", func(t *testing.T) {
		db := openDB(t)
		s := newStream(t, db)
		s.apply(ev("t", "a", errored, 1, failure("first")))
		if res := s.apply(ev("t", "a", errored, 2, failure("second"))); !res.Committed {
			t.Errorf("result %+v, want a commit", res)
		}
		reopen(t, db)
		if got := mustTenant(t, db, "t").WorkflowErrorMessage; got != "second" {
			t.Errorf("persisted error message = %q, want second", got)
		}
	})
}

func testCompletion(t *testing.T) {
	t.Run("Clear fields on successful completion", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).each(ev("t", "a", errored, 1, retries(3), failure("x")), ev("t", "a", succeeded, 2))
		if got, want := statusOf(mustTenant(t, db, "t")), (status{succeeded, "", 0, ""}); got != want {
			t.Errorf("status = %v, want %v", got, want)
		}
	})
	t.Run("Preserve fields on terminal failure", func(t *testing.T) {
		db := openDB(t)
		newStream(t, db).each(ev("t", "a", errored, 1, retries(3), failure("x")), ev("t", "a", failed, 2))
		if got, want := statusOf(mustTenant(t, db, "t")), (status{failed, "a", 3, "x"}); got != want {
			t.Errorf("status = %v, want %v", got, want)
		}
	})
}

func testQueries(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	newStream(t, db).apply(
		ev("calm", "a", running, 1),
		ev("retrying", "a", backingOff, 1, retries(2), failure("throttled")),
		ev("looping", "a", backingOff, 1, retries(9), failure("throttled")),
		ev("broken", "a", errored, 1, retries(5), failure("disk full")),
	)
	list := func(f substate.TenantFilter) []substate.TenantView {
		page, err := db.Tenants(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return page.Tenants
	}
	t.Run("Query tenants by sub-state", func(t *testing.T) {
		if got, want := ids(list(substate.TenantFilter{SubState: backingOff})), []string{"looping", "retrying"}; !slices.Equal(got, want) {
			t.Errorf("backing-off tenants = %v, want %v", got, want)
		}
	})
	t.Run("Query tenants with errors", func(t *testing.T) {
		got := list(substate.TenantFilter{HasError: true})
		var msgs []string
		for _, v := range got {
			msgs = append(msgs, v.TenantID+": "+v.WorkflowErrorMessage)
		}
		want := []string{"broken: disk full", "looping: throttled", "retrying: throttled"}
		if !slices.Equal(msgs, want) {
			t.Errorf("tenants with errors = %q, want %q", msgs, want)
		}
	})
	t.Run("Query tenants with high retry counts", func(t *testing.T) {
		got := ids(list(substate.TenantFilter{MinRetryCount: 3, SortRetryDesc: true}))
		if want := []string{"looping", "broken"}; !slices.Equal(got, want) {
			t.Errorf("retry count ≥ 3, highest first = %v, want %v", got, want)
		}
	})
}

func testLogs(t *testing.T) {
	t.Run("Log sub-state transitions", func(t *testing.T) {
		logs := logged(t, ev("t", "a", running, 1), ev("t", "a", waiting, 2))
		want := map[string]any{"level": "INFO", "msg": "view changed", "tenant": "t", "old": "running", "new": "waiting", "execution": "a"}
		if !containsLog(logs, want) {
			t.Errorf("logs %v lack %v", logs, want)
		}
	})
	t.Run("Log retry count changes", func(t *testing.T) {
		logs := logged(t, ev("t", "a", running, 1), ev("t", "a", backingOff, 2, retries(1), failure("timeout")), ev("t", "a", running, 3, retries(1)))
		want := map[string]any{"level": "WARN", "msg": "view changed", "tenant": "t", "new": "backing-off", "retries": 1.0, "error": "timeout"}
		if !containsLog(logs, want) {
			t.Errorf("logs %v lack %v", logs, want)
		}
		if got := logs[len(logs)-1]; got["level"] != "INFO" || got["retries"] != nil || got["error"] != nil {
			t.Errorf("back to running with the same count: %v, want info without retries or error", got)
		}
	})
	t.Run("Log error message changes", func(t *testing.T) {
		long := strings.Repeat("connection refused; ", 40)
		logs := logged(t, ev("t", "a", running, 1), ev("t", "a", errored, 2, failure(long)))
		want := map[string]any{"level": "WARN", "tenant": "t", "execution": "a", "error": long[:state.MaxLoggedError] + "…"}
		if !containsLog(logs, want) {
			t.Errorf("logs %v lack %v", logs, want)
		}
	})
	t.Run("Clip an error on a character boundary", func(t *testing.T) {
		long := strings.Repeat("é", state.MaxLoggedError) // two bytes each
		logs := logged(t, ev("t", "a", errored, 1, failure(long)))
		got, _ := logs[0]["error"].(string)
		if want := strings.Repeat("é", state.MaxLoggedError/2) + "…"; got != want {
			t.Errorf("error = %q, want %q", got, want)
		}
	})
	t.Run("Log no-ops at debug only", func(t *testing.T) {
		evs := []substate.EventData{ev("t", "a", running, 1), ev("t", "a", running, 1), ev("t", "a", running, 2)}
		if logs := logged(t, evs...); len(logs) != 1 {
			t.Errorf("at info: %v, want the one change", logs)
		}
		logs := loggedAt(t, slog.LevelDebug, evs...)
		var got []string
		for _, rec := range logs {
			got = append(got, fmt.Sprint(rec["level"], " ", rec["msg"], " ", rec["outcome"]))
		}
		want := []string{"INFO view changed <nil>", "DEBUG view unchanged stale", "DEBUG view unchanged unchanged"}
		if !slices.Equal(got, want) {
			t.Errorf("at debug: %q, want %q", got, want)
		}
	})
}

// logged applies evs one batch each to a view that logs as JSON and returns
// the log records.
func logged(t *testing.T, evs ...substate.EventData) []map[string]any {
	t.Helper()
	return loggedAt(t, slog.LevelInfo, evs...)
}

// loggedAt is logged with the logger's lowest level.
func loggedAt(t *testing.T, level slog.Level, evs ...substate.EventData) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	db := openDB(t, func(db *state.DB) {
		db.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	})
	newStream(t, db).each(evs...)
	var out []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

func containsLog(logs []map[string]any, want map[string]any) bool {
	return slices.ContainsFunc(logs, func(rec map[string]any) bool {
		for k, v := range want {
			if rec[k] != v {
				return false
			}
		}
		return true
	})
}

// Only real changes log, one line each.
func TestLogChangeQuiet(t *testing.T) {
	logs := logged(t,
		ev("t", "a", backingOff, 1, retries(4), failure("x")),
		ev("t", "a", backingOff, 2, retries(4), failure("x"), native("backing-off again")), // unchanged
		ev("t", "a", backingOff, 3, retries(1), failure("x")),                              // count went down
		ev("t", "a", succeeded, 4),
	)
	var msgs []string
	for _, rec := range logs {
		msgs = append(msgs, rec["level"].(string)+" "+rec["msg"].(string))
	}
	want := []string{
		"WARN view changed", // first event: backing-off with an error
		"INFO view changed", // succeeded
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("logs = %q, want %q", msgs, want)
	}
	if got := logs[len(logs)-1]["execution"]; got != "a" {
		t.Errorf("succeeded logs execution %v, want the one it cleared", got)
	}
}
