package mapping_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// hist builds history events from (id, previousEventId, type) triples; a
// failure type gets error "E<id>" and a plain-text cause.
func hist(tb testing.TB, specs ...any) []mapping.HistoryEvent {
	tb.Helper()
	var raw []map[string]any
	for i := 0; i+2 < len(specs); i += 3 {
		id, prev, typ := specs[i].(int), specs[i+1].(int), specs[i+2].(string)
		e := map[string]any{"id": id, "previousEventId": prev, "type": typ, "timestamp": 1718791230 + id}
		switch typ {
		case "TaskFailed":
			e["taskFailedEventDetails"] = map[string]any{"error": "E", "cause": "failed at " + typ}
		case "TaskTimedOut":
			e["taskTimedOutEventDetails"] = map[string]any{"error": "States.Timeout", "cause": "timed out"}
		case "LambdaFunctionFailed":
			e["lambdaFunctionFailedEventDetails"] = map[string]any{"error": "L", "cause": `{"errorMessage":"lambda broke"}`}
		}
		raw = append(raw, e)
	}
	var events []mapping.HistoryEvent
	if err := json.Unmarshal(mustJSON(tb, raw), &events); err != nil {
		tb.Fatal(err)
	}
	return events
}

func TestAnalyzeHistory(t *testing.T) {
	t.Run("Fixture", func(t *testing.T) {
		var page struct{ Events []mapping.HistoryEvent }
		if err := json.Unmarshal(fixture(t, "sfn-history-retry.json"), &page); err != nil {
			t.Fatal(err)
		}
		asc := mapping.AnalyzeHistory(slices.Clone(page.Events))
		desc := slices.Clone(page.Events)
		slices.Reverse(desc)
		// Two overlapping pages, newest first, as GetExecutionHistory(reverseOrder) pages them.
		pages := append(slices.Clone(desc[:8]), desc[5:]...)
		for name, got := range map[string]mapping.History{"asc": asc, "desc": mapping.AnalyzeHistory(desc), "pages": mapping.AnalyzeHistory(pages)} {
			if got != asc {
				t.Errorf("%s: %+v, want %+v", name, got, asc)
			}
		}
		if asc.RetryCount != 2 || asc.BackingOff || asc.NewestEventID != 12 || asc.LastError != "States.Timeout" {
			t.Errorf("got %+v, want 2 retries, not backing off, newest 12, last error States.Timeout", asc)
		}
	})
	tests := []struct {
		name       string
		events     []any
		retries    int
		backingOff bool
		lastCause  string
	}{
		{"Empty", nil, 0, false, ""},
		{"NoFailure", []any{1, 0, "ExecutionStarted", 2, 1, "TaskScheduled", 3, 2, "TaskStarted"}, 0, false, ""},
		{"FailedTip", []any{1, 0, "ExecutionStarted", 2, 1, "TaskScheduled", 3, 2, "TaskFailed"}, 1, true, "E: failed at TaskFailed"},
		{"RetriedOnce", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "TaskScheduled", 5, 4, "TaskStarted"}, 1, false, "E: failed at TaskFailed"},
		{"RetriedThenTimedOutTip", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "TaskScheduled", 5, 4, "TaskTimedOut"}, 2, true, "States.Timeout: timed out"},
		{"Caught", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "TaskStateExited"}, 0, false, "E: failed at TaskFailed"},
		{"LambdaJSONCause", []any{2, 1, "LambdaFunctionScheduled", 3, 2, "LambdaFunctionFailed"}, 1, true, "lambda broke"},
		{"ScheduledWithoutPrevious", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 0, "TaskScheduled"}, 1, false, "E: failed at TaskFailed"},
		// Retries count over the whole execution; the error is the current epoch's.
		{"RedriveKeepsRetries", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "TaskScheduled", 5, 4, "TaskFailed",
			6, 5, "ExecutionFailed", 7, 6, "ExecutionRedriven", 8, 7, "TaskScheduled", 9, 8, "TaskStarted"}, 1, false, ""},
		{"ParallelFailures", []any{2, 1, "TaskScheduled", 3, 1, "TaskScheduled", 4, 2, "TaskFailed", 5, 3, "TaskFailed",
			6, 4, "TaskScheduled", 7, 5, "TaskScheduled"}, 2, false, ""},
		{"ExecutionFailedAfterTaskFailure", []any{2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "ExecutionFailed"}, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mapping.AnalyzeHistory(hist(t, tt.events...))
			if h.RetryCount != tt.retries || h.BackingOff != tt.backingOff {
				t.Errorf("retries, backingOff = %d, %v; want %d, %v", h.RetryCount, h.BackingOff, tt.retries, tt.backingOff)
			}
			if tt.lastCause != "" && h.LastCause != tt.lastCause {
				t.Errorf("lastCause = %q, want %q", h.LastCause, tt.lastCause)
			}
		})
	}
}

func TestMapPoll(t *testing.T) {
	m := newMapper(t)
	t.Run("BackingOff", func(t *testing.T) {
		ev := mustMap(t, mappingWithRules(t, "input:$.tenantId"), substate.RawStepFunctionsPoll, backingOffPoll(t))[0]
		if got, want := ev.ErrorMessage, "db not ready"; got != want {
			t.Errorf("errorMessage = %q, want %q", got, want)
		}
		if got, want := ev.Revision, mapping.StepFunctionsRevision(0, mapping.RankActive, 5); got != want {
			t.Errorf("revision = %d, want %d", got, want)
		}
		// Backing off after the first failure: one failed attempt waits for its retry.
		if !ev.RetryCountKnown || ev.RetryCount != 1 || ev.ErrorType != "Boom" {
			t.Errorf("got %+v", ev)
		}
	})
	t.Run("RunningAfterRetryHasNoError", func(t *testing.T) {
		describe := []byte(`{"executionArn":"arn:aws:states:us-east-1:1:execution:sm:x","status":"RUNNING","startDate":1718791230.123,"input":"{\"customerId\":\"c1\"}"}`)
		ev := mustMap(t, m, substate.RawStepFunctionsPoll, pollPayload(t, describe, fixture(t, "sfn-history-retry.json")))[0]
		if ev.SubState != substate.StateRunning || ev.RetryCount != 2 || ev.ErrorMessage != "" || ev.TenantID != "c1" {
			t.Errorf("got %+v", ev)
		}
		if got, want := ev.Revision, mapping.StepFunctionsRevision(0, mapping.RankActive, 12); got != want {
			t.Errorf("revision = %d, want %d", got, want)
		}
	})
	t.Run("NoHistory", func(t *testing.T) {
		body := []byte(`{"execution":` + string(fixture(t, "sfn-describe-execution-failed.json")) + `,"polledAt":"2024-06-19T10:01:05.123Z"}`)
		ev := mustMap(t, m, substate.RawStepFunctionsPoll, body)[0]
		if ev.RetryCountKnown || ev.SubState != substate.StateFailed || ev.ErrorMessage != "payment provider returned HTTP 503" {
			t.Errorf("got %+v", ev)
		}
	})
	t.Run("ExponentTimestamps", func(t *testing.T) {
		describe := []byte(`{"executionArn":"arn:aws:states:us-east-1:1:execution:sm:x","status":"SUCCEEDED","startDate":1.718791241502E9,"stopDate":1718791262.338,"input":"{\"customerId\":\"c1\"}"}`)
		ev := mustMap(t, m, substate.RawStepFunctionsPoll, pollPayload(t, describe, []byte(`{"events":[]}`)))[0]
		if got, want := ev.ExecutionStartedAt.UnixMilli(), int64(1718791241502); got != want {
			t.Errorf("startedAt = %d, want %d", got, want)
		}
		if got, want := ev.OccurredAt.UnixMilli(), int64(1718791262338); got != want {
			t.Errorf("occurredAt = %d, want %d", got, want)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, body := range []string{`[]`, `{}`, `{"execution":{"status":"RUNNING"}}`, `{"execution":{"executionArn":"a","status":"RUNNING","startDate":"x"}}`} {
			_, err := m.Map(substate.RawEvent{Kind: substate.RawStepFunctionsPoll, Body: []byte(body)})
			wantCode(t, err, substate.EINVALID)
		}
	})
}

// TestMapPollPriorRetriesBounded: a poll's prior summary claiming a
// negative or huge retry count still maps to a count that is not negative.
func TestMapPollPriorRetriesBounded(t *testing.T) {
	m := newMapper(t)
	var payload map[string]any
	if err := json.Unmarshal(backingOffPoll(t), &payload); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		retries int
		want    int
	}{{-5, 1}, {math.MaxInt, 1<<31 + 1}} {
		payload["history"].(map[string]any)["prior"] = map[string]any{"throughEventId": 2, "events": 2, "retries": tt.retries}
		ev := mustMap(t, m, substate.RawStepFunctionsPoll, mustJSON(t, payload))[0]
		if ev.RetryCount != tt.want {
			t.Errorf("prior retries %d: retry count %d, want %d", tt.retries, ev.RetryCount, tt.want)
		}
	}
}
