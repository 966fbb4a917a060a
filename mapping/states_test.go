package mapping_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// sfnEvent returns an EventBridge status change for status with detail
// fields overridden by set.
func sfnEvent(tb testing.TB, status string, set map[string]any) []byte {
	tb.Helper()
	detail := map[string]any{
		"executionArn":    "arn:aws:states:us-east-1:123456789012:execution:provision:acme--run-1",
		"stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:provision",
		"name":            "acme--run-1",
		"status":          status,
		"startDate":       1718791230123,
		"stopDate":        nil,
		"input":           `{"tenantId":"acme"}`,
		"output":          nil,
	}
	if status != "RUNNING" && status != "PENDING_REDRIVE" {
		detail["stopDate"] = 1718791262338
	}
	for k, v := range set {
		detail[k] = v
	}
	return mustJSON(tb, map[string]any{
		"version": "0", "id": "ev-1", "detail-type": mapping.EventBridgeDetailType, "source": mapping.EventBridgeSource,
		"account": "123456789012", "time": "2024-06-19T10:00:30Z", "region": "us-east-1", "detail": detail,
	})
}

// restateRow returns a sys_invocation row for status with columns
// overridden by set (a nil value deletes the column).
func restateRow(tb testing.TB, status string, set map[string]any) []byte {
	tb.Helper()
	row := map[string]any{
		"id": "inv_1", "target": "Provision/acme/run", "target_service_name": "Provision",
		"target_service_key": "acme", "status": status,
		"created_at": "2024-06-19T10:00:41.502Z", "modified_at": "2024-06-19T10:00:47.905Z",
	}
	for k, v := range set {
		if v == nil {
			delete(row, k)
			continue
		}
		row[k] = v
	}
	return mustJSON(tb, row)
}

func engineEvent(tb testing.TB, status string) []byte {
	tb.Helper()
	return mustJSON(tb, substate.EngineEvent{
		ID: "acme-1/3", TenantID: "acme", ExecutionID: "acme-1", Workflow: "provision", Seq: 3,
		Status: status, State: "CreateDatabase", Attempt: 2, RetryCount: 1,
	})
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// backingOffPoll is a RUNNING execution whose task just failed.
func backingOffPoll(tb testing.TB) []byte {
	tb.Helper()
	describe := mustJSON(tb, map[string]any{
		"executionArn": "arn:aws:states:us-east-1:123456789012:execution:provision:acme--run-1",
		"status":       "RUNNING", "startDate": 1718791230.123, "input": `{"tenantId":"acme"}`,
	})
	history := mustJSON(tb, map[string]any{"events": []map[string]any{
		{"id": 5, "previousEventId": 4, "type": "TaskFailed", "timestamp": 1718791231.019,
			"taskFailedEventDetails": map[string]any{"error": "Boom", "cause": `{"errorMessage":"db not ready"}`}},
		{"id": 4, "previousEventId": 3, "type": "TaskStarted", "timestamp": 1718791230.201},
		{"id": 3, "previousEventId": 2, "type": "TaskScheduled", "timestamp": 1718791230.15},
	}})
	return pollPayload(tb, describe, history)
}

// TestProviderStates maps every native state of design §4 (and unknown
// ones) and checks sub-state, verb and legacy status.
func TestProviderStates(t *testing.T) {
	tests := []struct {
		name    string
		kind    substate.RawKind
		body    func(testing.TB) []byte
		sub     substate.SubState
		verb    substate.Verb
		status  substate.Status
		unknown bool
	}{
		{"sfn/RUNNING", substate.RawEventBridge, sfnStatus("RUNNING"), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"sfn/SUCCEEDED", substate.RawEventBridge, sfnStatus("SUCCEEDED"), substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, false},
		{"sfn/FAILED", substate.RawEventBridge, sfnStatus("FAILED"), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"sfn/TIMED_OUT", substate.RawEventBridge, sfnStatus("TIMED_OUT"), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"sfn/ABORTED", substate.RawEventBridge, sfnStatus("ABORTED"), substate.StateFailed, substate.VerbCancelled, substate.StatusFailed, false},
		{"sfn/PENDING_REDRIVE", substate.RawEventBridge, sfnStatus("PENDING_REDRIVE"), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"sfn/unknown", substate.RawEventBridge, sfnStatus("HIBERNATING"), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, true},
		{"sfn/poll/RUNNING/backing-off", substate.RawStepFunctionsPoll, backingOffPoll, substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},

		{"restate/pending", substate.RawRestate, restateStatus("pending", nil), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"restate/scheduled", substate.RawRestate, restateStatus("scheduled", nil), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"restate/ready", substate.RawRestate, restateStatus("ready", nil), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"restate/running", substate.RawRestate, restateStatus("running", nil), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"restate/active", substate.RawRestate, restateStatus("active", nil), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"restate/running/retry-scheduled", substate.RawRestate, restateStatus("running", retryAt("2024-06-19T10:00:49.905Z")), substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{"restate/ready/retry-scheduled", substate.RawRestate, restateStatus("ready", retryAt("2024-06-19T10:00:49.905Z")), substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{"restate/active/retry-scheduled", substate.RawRestate, restateStatus("active", retryAt("2024-06-19T10:00:49.905Z")), substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{"restate/running/retry-passed", substate.RawRestate, restateStatus("running", retryAt("2024-06-19T10:00:47.905Z")), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"restate/suspended/retry-scheduled", substate.RawRestate, restateStatus("suspended", retryAt("2024-06-19T10:00:49.905Z")), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"restate/backing-off", substate.RawRestate, restateStatus("backing-off", nil), substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{"restate/suspended", substate.RawRestate, restateStatus("suspended", nil), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"restate/paused", substate.RawRestate, restateStatus("paused", nil), substate.StateError, substate.VerbFailing, substate.StatusRunning, false},
		{"restate/completed/success", substate.RawRestate, restateStatus("completed", map[string]any{"completion_result": "success"}), substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, false},
		{"restate/completed/failure", substate.RawRestate, restateStatus("completed", map[string]any{"completion_result": "failure", "completion_failure": "[500] boom"}), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"restate/completed/killed", substate.RawRestate, restateStatus("completed", map[string]any{"completion_result": "failure", "completion_failure": "[409] killed"}), substate.StateFailed, substate.VerbCancelled, substate.StatusFailed, false},
		{"restate/completed/canceled", substate.RawRestate, restateStatus("completed", map[string]any{"completion_result": "failure", "completion_failure": "[409] canceled"}), substate.StateFailed, substate.VerbCancelled, substate.StatusFailed, false},
		{"restate/completed/no-result", substate.RawRestate, restateStatus("completed", nil), substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, false},
		{"restate/completed/unknown-result", substate.RawRestate, restateStatus("completed", map[string]any{"completion_result": "vanished"}), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, true},
		{"restate/succeeded", substate.RawRestate, restateStatus("succeeded", nil), substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, false},
		{"restate/failed", substate.RawRestate, restateStatus("failed", nil), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"restate/error", substate.RawRestate, restateStatus("error", nil), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"restate/unknown", substate.RawRestate, restateStatus("migrating", nil), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, true},

		{"engine/running", substate.RawEngine, engineStatus("running"), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, false},
		{"engine/waiting", substate.RawEngine, engineStatus("waiting"), substate.StateWaiting, substate.VerbWaiting, substate.StatusPaused, false},
		{"engine/backing-off", substate.RawEngine, engineStatus("backing-off"), substate.StateBackingOff, substate.VerbRetrying, substate.StatusRunning, false},
		{"engine/error", substate.RawEngine, engineStatus("error"), substate.StateError, substate.VerbFailing, substate.StatusRunning, false},
		{"engine/succeeded", substate.RawEngine, engineStatus("succeeded"), substate.StateSucceeded, substate.VerbCompleted, substate.StatusCompleted, false},
		{"engine/failed", substate.RawEngine, engineStatus("failed"), substate.StateFailed, substate.VerbFailed, substate.StatusFailed, false},
		{"engine/unknown", substate.RawEngine, engineStatus("teleporting"), substate.StateRunning, substate.VerbExecuting, substate.StatusRunning, true},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var hooked []string
			m := mapping.New(mapping.Config{
				Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
				OnUnknown: func(p string) { hooked = append(hooked, p) },
			})
			evs := mustMap(t, m, tt.kind, tt.body(t))
			if len(evs) != 1 {
				t.Fatalf("got %d events, want 1", len(evs))
			}
			ev := evs[0]
			covered[rowKey(tt.kind.Provider(), ev.ProviderState, ev.SubState, ev.Verb)] = true
			if got, want := [3]string{string(ev.SubState), string(ev.Verb), string(ev.Status)},
				[3]string{string(tt.sub), string(tt.verb), string(tt.status)}; got != want {
				t.Errorf("sub-state, verb, status = %v, want %v", got, want)
			}
			if got, want := ev.Terminal, tt.sub.Terminal(); got != want {
				t.Errorf("terminal = %v, want %v", got, want)
			}
			if got, want := m.Unknown(tt.kind.Provider()), uint64(len(hooked)); got != want {
				t.Errorf("Unknown() = %d, hook calls %d", got, want)
			}
			if got := len(hooked) == 1; got != tt.unknown {
				t.Fatalf("unknown hook calls = %v, want unknown = %v", hooked, tt.unknown)
			}
			if tt.unknown && (!strings.Contains(logs.String(), "level=WARN") ||
				!strings.Contains(logs.String(), "provider="+string(tt.kind.Provider())) ||
				!strings.Contains(logs.String(), "state="+ev.ProviderState)) {
				t.Errorf("warning log does not name provider and state: %q", logs.String())
			}
			if !tt.unknown && logs.Len() != 0 {
				t.Errorf("unexpected log: %q", logs.String())
			}
		})
	}
	for _, r := range mapping.Table() {
		if !covered[rowKey(r.Provider, r.State, r.SubState, r.Verb)] {
			t.Errorf("no case for the table row %s %s %q → %s", r.Provider, r.State, r.Condition, r.SubState)
		}
	}
}

func rowKey(p substate.Provider, state string, s substate.SubState, v substate.Verb) string {
	return string(p) + " " + state + " " + string(s) + " " + string(v)
}

func sfnStatus(status string) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return sfnEvent(tb, status, nil) }
}

func restateStatus(status string, set map[string]any) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return restateRow(tb, status, set) }
}

// retryAt sets next_retry_at; restateRow's modified_at is 10:00:47.905Z.
func retryAt(at string) map[string]any {
	return map[string]any{"next_retry_at": at, "retry_count": 2, "last_failure": "[500] boom"}
}

func engineStatus(status string) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return engineEvent(tb, status) }
}

// TestTableConsistent checks every row's verb and legacy status against
// the canonical sub-state table; only a failed row may say cancelled.
func TestTableConsistent(t *testing.T) {
	for _, r := range mapping.Table() {
		if got, want := r.Status, r.SubState.Status(); got != want {
			t.Errorf("%s %s %q: status %q, want %q", r.Provider, r.State, r.Condition, got, want)
		}
		if r.Verb != r.SubState.Verb() && !(r.Verb == substate.VerbCancelled && r.SubState == substate.StateFailed) {
			t.Errorf("%s %s %q: verb %q for sub-state %q", r.Provider, r.State, r.Condition, r.Verb, r.SubState)
		}
	}
}

// TestNoRetryMetadata is the spec's scenario: a provider that exposes no
// retry metadata gives running with retry count 0, not known.
func TestNoRetryMetadata(t *testing.T) {
	m := newMapper(t)
	for name, tc := range map[string]struct {
		kind substate.RawKind
		body []byte
	}{
		"stepfunctions": {substate.RawEventBridge, sfnEvent(t, "RUNNING", nil)},
		"restate":       {substate.RawRestate, restateRow(t, "running", map[string]any{"retry_count": nil})},
	} {
		t.Run(name, func(t *testing.T) {
			ev := mustMap(t, m, tc.kind, tc.body)[0]
			if ev.SubState != substate.StateRunning || ev.RetryCount != 0 || ev.RetryCountKnown {
				t.Fatalf("sub-state %q retry count %d known %v, want running 0 false", ev.SubState, ev.RetryCount, ev.RetryCountKnown)
			}
		})
	}
}
