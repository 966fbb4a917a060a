package mapping_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

func TestMapRestate(t *testing.T) {
	m := newMapper(t)
	mapOne := func(t *testing.T, body []byte) substate.EventData {
		t.Helper()
		evs := mustMap(t, m, substate.RawRestate, body)
		if len(evs) != 1 {
			t.Fatalf("got %d events, want 1", len(evs))
		}
		return evs[0]
	}
	t.Run("RetryCountIsFailedAttempts", func(t *testing.T) {
		// retry_count is the attempt number: backing off after attempt n,
		// n attempts failed; running attempt n, n-1 did.
		tests := []struct {
			status    string
			attempts  any
			want      int
			wantKnown bool
		}{
			{"backing-off", 1, 1, true}, {"backing-off", 4, 4, true}, {"backing-off", nil, 0, false},
			{"running", 1, 0, true}, {"running", 4, 3, true}, {"running", 0, 0, true}, {"running", nil, 0, false},
			{"paused", nil, 0, false}, {"completed", nil, 0, false},
			{"ready", nil, 0, true}, // between two attempts: no failure it could add
		}
		for _, tt := range tests {
			ev := mapOne(t, restateRow(t, tt.status, map[string]any{"retry_count": tt.attempts}))
			if ev.RetryCount != tt.want || ev.RetryCountKnown != tt.wantKnown {
				t.Errorf("%s retry_count %v: got %d known %v, want %d known %v", tt.status, tt.attempts, ev.RetryCount, ev.RetryCountKnown, tt.want, tt.wantKnown)
			}
		}
	})
	t.Run("RevisionOrdersRowsOfOneModifiedAt", func(t *testing.T) {
		// The order a real server reports a retry in, all under one modified_at.
		steps := []struct {
			status   string
			attempts any
		}{{"ready", nil}, {"running", 1}, {"backing-off", 1}, {"running", 2}, {"backing-off", 2}, {"running", 3}, {"completed", nil}}
		var last substate.Revision
		for i, s := range steps {
			ev := mapOne(t, restateRow(t, s.status, map[string]any{"retry_count": s.attempts}))
			if i > 0 && ev.Revision <= last {
				t.Errorf("%s attempt %v: revision %d not after %d", s.status, s.attempts, ev.Revision, last)
			}
			last = ev.Revision
		}
		later := mapOne(t, restateRow(t, "paused", map[string]any{"modified_at": "2024-06-19T10:00:47.906Z"}))
		if later.Revision <= last {
			t.Errorf("a later modified_at must be newer: %d <= %d", later.Revision, last)
		}
	})
	t.Run("ErrorMessage", func(t *testing.T) {
		tests := []struct {
			status   string
			set      map[string]any
			msg, typ string
		}{
			{"backing-off", map[string]any{"last_failure": "[500 Internal] boom\nError: boom\n    at handler (service.js:7:11)", "last_failure_error_code": "RT0007"}, "boom", "RT0007"},
			{"paused", map[string]any{"last_failure": "[500] boom"}, "boom", "500"},
			{"running", map[string]any{"last_failure": "[500] boom"}, "boom", "500"},
			{"backing-off", map[string]any{"last_failure": "plain text\nsecond line"}, "plain text", ""},
			{"completed", map[string]any{"completion_result": "failure", "completion_failure": "[402] declined"}, "declined", "402"},
			{"completed", map[string]any{"completion_result": "success", "last_failure": "[500] old"}, "", ""},
		}
		for _, tt := range tests {
			ev := mapOne(t, restateRow(t, tt.status, tt.set))
			if ev.ErrorMessage != tt.msg || ev.ErrorType != tt.typ {
				t.Errorf("%s %v: error %q type %q, want %q %q", tt.status, tt.set, ev.ErrorMessage, ev.ErrorType, tt.msg, tt.typ)
			}
		}
	})
	t.Run("Fields", func(t *testing.T) {
		ev := mapOne(t, restateRow(t, "running", map[string]any{"target_service_name": nil}))
		modified := time.Date(2024, 6, 19, 10, 0, 47, 905e6, time.UTC)
		if ev.ExecutionID != "inv_1" || ev.Workflow != "Provision/acme/run" || ev.TenantID != "acme" ||
			!ev.OccurredAt.Equal(modified) || ev.Revision != mapping.RestateRevision(modified, 0, mapping.RestateRankRunning) ||
			!ev.ExecutionStartedAt.Equal(time.Date(2024, 6, 19, 10, 0, 41, 502e6, time.UTC)) {
			t.Errorf("got %+v", ev)
		}
	})
	t.Run("TimestampForms", func(t *testing.T) {
		for _, v := range []any{"2024-06-19T10:00:47.905Z", "2024-06-19T10:00:47.905", "2024-06-19 10:00:47.905", 1718791247905} {
			ev := mapOne(t, restateRow(t, "running", map[string]any{"modified_at": v}))
			if got, want := ev.OccurredAt.UnixMilli(), int64(1718791247905); got != want {
				t.Errorf("modified_at %v: occurredAt %d, want %d", v, got, want)
			}
		}
	})
	t.Run("SeveralRows", func(t *testing.T) {
		body := []byte(`{"rows":[` + string(restateRow(t, "running", nil)) + `,` +
			string(restateRow(t, "completed", map[string]any{"id": "inv_2", "completion_result": "success"})) + `]}`)
		evs := mustMap(t, m, substate.RawRestate, body)
		if len(evs) != 2 || evs[0].ExecutionID != "inv_1" || evs[1].SubState != substate.StateSucceeded {
			t.Errorf("got %+v", evs)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		tests := map[string]string{
			"NotJSON":     `nope`,
			"EmptyRows":   `{"rows":[]}`,
			"NoID":        string(restateRow(t, "running", map[string]any{"id": nil})),
			"NoStatus":    string(restateRow(t, "running", map[string]any{"status": nil})),
			"NoTimes":     string(restateRow(t, "running", map[string]any{"created_at": nil, "modified_at": nil})),
			"BadTime":     string(restateRow(t, "running", map[string]any{"modified_at": "yesterday"})),
			"RowsNotList": `{"rows":{}}`,
		}
		for name, body := range tests {
			t.Run(name, func(t *testing.T) {
				_, err := m.Map(substate.RawEvent{Kind: substate.RawRestate, Body: []byte(body)})
				wantCode(t, err, substate.EINVALID)
			})
		}
	})
}

func TestMapEngine(t *testing.T) {
	m := newMapper(t)
	start := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	ev := substate.EngineEvent{
		ID: "acme-1/7", TenantID: "acme", ExecutionID: "acme-1", Workflow: "provision", Seq: 7,
		Status: substate.EngineBackingOff, RetryCount: 2, ErrorType: "ServiceUnavailable", Error: "no responders",
		StartedAt: start, Time: start.Add(time.Minute),
	}
	got := mustMap(t, m, substate.RawEngine, mustJSON(t, ev))[0]
	want := substate.EventData{
		TenantID: "acme", Provider: substate.ProviderEngine, ExecutionID: "acme-1", Workflow: "provision",
		SubState: substate.StateBackingOff, Verb: substate.VerbRetrying, Status: substate.StatusRunning,
		RetryCount: 2, RetryCountKnown: true, ErrorMessage: "no responders", ErrorType: "ServiceUnavailable",
		ErrorFingerprint: "engine/serviceunavailable/no responders",
		ProviderState:    "backing-off", OccurredAt: start.Add(time.Minute), ExecutionStartedAt: start, Revision: 7,
		MappingVersion: mapping.Version,
	}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, body := range []string{`"x"`, `{}`, `{"executionId":"a"}`, `{"executionId":"a","status":"running","seq":-1}`} {
			_, err := m.Map(substate.RawEvent{Kind: substate.RawEngine, Body: []byte(body)})
			wantCode(t, err, substate.EINVALID)
		}
	})
	t.Run("ErrNoTenant", func(t *testing.T) {
		_, err := m.Map(substate.RawEvent{Kind: substate.RawEngine, Body: []byte(`{"executionId":"a","status":"running"}`)})
		wantCode(t, err, substate.ENOTENANT)
	})
}

func TestMapRestateRecordedRows(t *testing.T) {
	m := newMapper(t)
	t.Run("KeylessHasNoTenant", func(t *testing.T) {
		_, err := m.Map(substate.RawEvent{Kind: substate.RawRestate, Body: fixture(t, "restate-keyless-completed.json")})
		wantCode(t, err, substate.ENOTENANT)
	})
	t.Run("PausedWithoutJournalKeepsTheCount", func(t *testing.T) {
		ev := mustMap(t, m, substate.RawRestate, restateRow(t, "paused", nil))[0]
		if ev.SubState != substate.StateError || ev.RetryCountKnown || ev.ErrorMessage != "" {
			t.Errorf("got %+v: a paused row alone says nothing of its failures", ev)
		}
	})
}

// TestRetryCountOneStory maps one story, a task that fails once and is
// retried, as each provider reports it: backing off after the failure and
// running the retry both count 1, as the engine's own events do (see
// engine/retry_test.go; engine/onestory_test.go tells a longer story with
// the engine running it for real).
func TestRetryCountOneStory(t *testing.T) {
	m := mappingWithRules(t, "input:$.tenantId", "restate:key", "engine:tenant")
	describe := []byte(`{"executionArn":"arn:aws:states:us-east-1:1:execution:sm:x","status":"RUNNING","startDate":1718791230.123,"input":"{\"tenantId\":\"acme\"}"}`)
	sfnAt := func(events ...any) substate.EventData {
		h := mustJSON(t, map[string]any{"events": hist(t, events...)})
		return mustMap(t, m, substate.RawStepFunctionsPoll, pollPayload(t, describe, h))[0]
	}
	restateAt := func(status string, attempt int) substate.EventData {
		return mustMap(t, m, substate.RawRestate, restateRow(t, status, map[string]any{"retry_count": attempt, "last_failure": "[500 Internal] boom"}))[0]
	}
	engineAt := func(status string, retries int) substate.EventData {
		ev := substate.EngineEvent{ID: "x/1", TenantID: "acme", ExecutionID: "x", Seq: 1, Status: status, RetryCount: retries,
			StartedAt: time.Now(), Time: time.Now()}
		return mustMap(t, m, substate.RawEngine, mustJSON(t, ev))[0]
	}
	for _, tt := range []struct {
		provider            string
		backingOff, running substate.EventData
	}{
		{"stepfunctions", sfnAt(1, 0, "ExecutionStarted", 2, 1, "TaskScheduled", 3, 2, "TaskFailed"),
			sfnAt(1, 0, "ExecutionStarted", 2, 1, "TaskScheduled", 3, 2, "TaskFailed", 4, 3, "TaskScheduled")},
		{"restate", restateAt("backing-off", 1), restateAt("running", 2)},
		{"engine", engineAt(substate.EngineBackingOff, 1), engineAt(substate.EngineRunning, 1)},
	} {
		if b, r := tt.backingOff, tt.running; b.SubState != substate.StateBackingOff || b.RetryCount != 1 || r.SubState != substate.StateRunning || r.RetryCount != 1 {
			t.Errorf("%s: backing off %s/%d, retry running %s/%d; want backing-off/1 and running/1", tt.provider, b.SubState, b.RetryCount, r.SubState, r.RetryCount)
		}
	}
}
