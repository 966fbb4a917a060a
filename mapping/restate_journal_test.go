package mapping_test

import (
	"math"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// journal builds sys_journal_events rows, a second apart: "T:msg" is a
// TransientError, "P:msg" a Paused event carrying that last failure.
func journal(tb testing.TB, specs ...string) []map[string]any {
	tb.Helper()
	at := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	var out []map[string]any
	for i, s := range specs {
		typ, msg := "TransientError", s[2:]
		ev := map[string]any{"ty": typ, "error_code": 500, "error_message": msg, "error_stacktrace": "Error: " + msg + "\n    at x (service.js:1:1)", "restate_doc_error_code": "RT0007"}
		if s[0] == 'P' {
			typ = "Paused"
			ev = map[string]any{"ty": typ, "last_failure": ev}
		}
		out = append(out, map[string]any{
			"id": "inv_1", "appended_at": at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
			"event_type": typ, "event_json": string(mustJSON(tb, ev)),
		})
	}
	return out
}

// TestMapRestateJournalRetryCount counts the failed attempts of paused and
// resumed invocations as a real 1.7 server records them: a TransientError
// only when the failure differs from the one before, the failure of the
// attempt a retry policy pauses on only in the Paused event, retry_count
// from 1 again after a resume, and a row paused by hand keeping its
// retry_count.
func TestMapRestateJournalRetryCount(t *testing.T) {
	m := newMapper(t)
	pauses3 := map[string]any{"max_attempts": 3, "on_max_attempts": "Pause"}
	tests := []struct {
		name    string
		status  string
		attempt any // retry_count column, nil for none
		events  []string
		policy  any
		want    int
		wantMsg string
	}{
		{"DistinctMessagesPaused", "paused", nil, []string{"T:a1", "T:a2", "P:a3"}, nil, 3, "a3"},
		{"SameMessagePausedWithPolicy", "paused", nil, []string{"T:busy", "P:busy"}, pauses3, 3, "busy"},
		{"SameMessagePausedNoPolicy", "paused", nil, []string{"T:busy", "P:busy"}, nil, 2, "busy"},
		{"PolicyKillsIsNoCount", "paused", nil, []string{"T:busy", "P:busy"}, map[string]any{"max_attempts": 9, "on_max_attempts": "Kill"}, 2, "busy"},
		{"PausedTwice", "paused", nil, []string{"T:busy", "P:busy", "T:busy", "P:busy"}, pauses3, 6, "busy"},
		{"PausedByHand", "paused", 2, []string{"T:a1", "T:a2", "P:a2"}, pauses3, 2, "a2"},
		{"ResumedBackingOff", "backing-off", 2, []string{"T:busy", "P:busy", "T:busy"}, pauses3, 5, ""},
		{"ResumedRunning", "running", 1, []string{"T:busy", "P:busy"}, pauses3, 3, ""},
		{"ResumedReady", "ready", nil, []string{"T:busy", "P:busy"}, pauses3, 3, ""},
		{"NeverPausedBackingOff", "backing-off", 4, []string{"T:a1", "T:a2", "T:a3", "T:a4"}, pauses3, 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := map[string]any{"retry_count": tt.attempt, "sys_journal_events": journal(t, tt.events...), "handler_retry_policy": tt.policy}
			if tt.status == "backing-off" {
				set["last_failure"] = "[500 Internal] busy\nError: busy\n    at x (service.js:1:1)"
			}
			ev := mustMap(t, m, substate.RawRestate, restateRow(t, tt.status, set))[0]
			wantMsg := tt.wantMsg
			if tt.status == "backing-off" {
				wantMsg = "busy"
			}
			if ev.RetryCount != tt.want || !ev.RetryCountKnown || ev.ErrorMessage != wantMsg {
				t.Errorf("retries %d (known %v), error %q; want %d, %q", ev.RetryCount, ev.RetryCountKnown, ev.ErrorMessage, tt.want, wantMsg)
			}
		})
	}
	t.Run("LaterPauseIsNotTheRows", func(t *testing.T) {
		// The journal was read after the row: it already holds the next
		// pause, appended after the row's modified_at.
		set := map[string]any{"retry_count": 2, "modified_at": "2024-06-19T10:00:01.500Z", "handler_retry_policy": pauses3,
			"sys_journal_events": journal(t, "T:busy", "P:busy", "T:busy", "P:busy"), "sys_journal_events_count": 4}
		ev := mustMap(t, m, substate.RawRestate, restateRow(t, "running", set))[0]
		if want := 3 + 1; ev.RetryCount != want {
			t.Errorf("retries %d, want %d: the spell paused before the row, and one failed attempt since", ev.RetryCount, want)
		}
	})
	t.Run("CutJournalCountsTheCutEvents", func(t *testing.T) {
		set := map[string]any{"sys_journal_events": journal(t, "T:a9", "P:a10"), "sys_journal_events_count": 10}
		ev := mustMap(t, m, substate.RawRestate, restateRow(t, "paused", set))[0]
		if want := 8 + 2; ev.RetryCount != want {
			t.Errorf("retries %d, want %d", ev.RetryCount, want)
		}
	})
	t.Run("HugeCountsDoNotOverflow", func(t *testing.T) {
		huge := map[string]any{"max_attempts": math.MaxInt, "on_max_attempts": "Pause"}
		for _, tt := range []struct {
			name, status string
			set          map[string]any
			want         int
		}{
			{"PolicyTwice", "paused", map[string]any{"sys_journal_events": journal(t, "P:a", "P:b"), "handler_retry_policy": huge}, 2 << 31},
			{"RetryCount", "paused", map[string]any{"retry_count": math.MaxInt, "sys_journal_events": journal(t, "P:a"), "handler_retry_policy": huge}, 1 << 31},
			{"EventCount", "paused", map[string]any{"sys_journal_events": journal(t, "P:a"), "sys_journal_events_count": math.MaxInt}, 1 << 31},
			{"Resumed", "backing-off", map[string]any{"retry_count": math.MaxInt, "sys_journal_events": journal(t, "P:a"), "handler_retry_policy": pauses3}, 3 + 1<<31},
		} {
			ev := mustMap(t, m, substate.RawRestate, restateRow(t, tt.status, tt.set))[0]
			if ev.RetryCount != tt.want {
				t.Errorf("%s: retries %d, want %d", tt.name, ev.RetryCount, tt.want)
			}
		}
	})
	t.Run("StackTraceStaysOut", func(t *testing.T) {
		ev := mustMap(t, m, substate.RawRestate, restateRow(t, "paused", map[string]any{"sys_journal_events": journal(t, "P:boom")}))[0]
		if ev.ErrorMessage != "boom" || ev.ErrorType != "RT0007" {
			t.Errorf("error %q type %q", ev.ErrorMessage, ev.ErrorType)
		}
	})
}

// TestMapRestateJournalCompleted counts a failed invocation's retries
// from its journal: a completed row has no retry_count, so without the
// journal the count would be whatever a poll last saw. The attempt that
// ended it was not retried.
func TestMapRestateJournalCompleted(t *testing.T) {
	m := newMapper(t)
	kills4 := map[string]any{"max_attempts": 4, "on_max_attempts": "Kill"}
	pauses3 := map[string]any{"max_attempts": 3, "on_max_attempts": "Pause"}
	tests := []struct {
		name     string
		failure  string
		events   []string
		policy   any
		want     int
		wantMsg  string
		wantVerb substate.Verb
	}{
		{"KilledByPolicy", "[500] a4", []string{"T:a1", "T:a2", "T:a3"}, kills4, 3, "a4", substate.VerbFailed},
		{"KilledByPolicyAlike", "[500] busy", []string{"T:busy"}, kills4, 3, "busy", substate.VerbFailed},
		{"KilledByPolicyNoPolicyKnown", "[500] a4", []string{"T:a1", "T:a2", "T:a3"}, nil, 3, "a4", substate.VerbFailed},
		{"TerminalAfterRetries", "[402] card declined", []string{"T:a1", "T:a2"}, kills4, 2, "card declined", substate.VerbFailed},
		{"KilledByHandBackingOff", "[409] killed", []string{"T:a1", "T:a2", "T:a3", "T:a4", "T:a5"}, nil, 5, "killed", substate.VerbCancelled},
		{"PausedResumedThenKilled", "[409] killed", []string{"T:a1", "T:a2", "P:a3", "T:a4", "T:a5"}, pauses3, 5, "killed", substate.VerbCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := map[string]any{"completion_result": "failure", "completion_failure": tt.failure,
				"sys_journal_events": journal(t, tt.events...), "handler_retry_policy": tt.policy}
			ev := mustMap(t, m, substate.RawRestate, restateRow(t, "completed", set))[0]
			if ev.RetryCount != tt.want || !ev.RetryCountKnown || ev.ErrorMessage != tt.wantMsg || ev.Verb != tt.wantVerb {
				t.Errorf("retries %d (known %v), error %q, verb %s; want %d, %q, %s", ev.RetryCount, ev.RetryCountKnown, ev.ErrorMessage, ev.Verb, tt.want, tt.wantMsg, tt.wantVerb)
			}
		})
	}
	t.Run("NoJournalKeepsTheCount", func(t *testing.T) {
		set := map[string]any{"completion_result": "failure", "completion_failure": "[500] a4"}
		if ev := mustMap(t, m, substate.RawRestate, restateRow(t, "completed", set))[0]; ev.RetryCountKnown {
			t.Errorf("a completed row without its journal claims %d retries", ev.RetryCount)
		}
	})
}

// TestMapEngineErrorFirstLine keeps a task's stack trace out of the
// engine's errorMessage: the raw event keeps it.
func TestMapEngineErrorFirstLine(t *testing.T) {
	m := newMapper(t)
	ev := substate.EngineEvent{ID: "acme-1/2", TenantID: "acme", ExecutionID: "acme-1", Seq: 2, Status: substate.EngineError,
		ErrorType: "TaskFailed", Error: "card declined\n    at charge (billing.go:12)"}
	got := mustMap(t, m, substate.RawEngine, mustJSON(t, ev))[0]
	if got.ErrorMessage != "card declined" || got.ErrorType != "TaskFailed" {
		t.Errorf("error %q type %q, want the first line", got.ErrorMessage, got.ErrorType)
	}
}
