package mapping_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// TestNextRetryAt checks the next retry time each provider's backing-off
// events carry: the engine's NextRetryAt and a Restate row's
// next_retry_at, on backing-off events only; Step Functions reports none.
func TestNextRetryAt(t *testing.T) {
	m := newMapper(t)
	one := func(t *testing.T, kind substate.RawKind, body []byte) substate.EventData {
		t.Helper()
		evs := mustMap(t, m, kind, body)
		if len(evs) != 1 {
			t.Fatalf("got %d events, want 1", len(evs))
		}
		return evs[0]
	}
	retryAt := time.Date(2024, 6, 19, 10, 0, 49, 905e6, time.UTC)
	t.Run("Engine", func(t *testing.T) {
		start := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
		for _, tt := range []struct {
			status string
			want   time.Time
		}{{substate.EngineBackingOff, retryAt}, {substate.EngineError, time.Time{}}, {substate.EngineRunning, time.Time{}}} {
			ev := substate.EngineEvent{ID: "acme-1/4", TenantID: "acme", ExecutionID: "acme-1", Workflow: "provision", Seq: 4,
				Status: tt.status, RetryCount: 1, Error: "busy", NextRetryAt: retryAt, StartedAt: start, Time: start.Add(time.Minute)}
			if got := one(t, substate.RawEngine, mustJSON(t, ev)); !got.NextRetryAt.Equal(tt.want) {
				t.Errorf("engine %s: next retry %v, want %v", tt.status, got.NextRetryAt, tt.want)
			}
		}
	})
	t.Run("Restate", func(t *testing.T) {
		for _, tt := range []struct {
			name, status string
			set          map[string]any
			sub          substate.SubState
			want         time.Time
		}{
			{"BackingOff", "backing-off", map[string]any{"retry_count": 2, "next_retry_at": "2024-06-19T10:00:49.905Z"}, substate.StateBackingOff, retryAt},
			{"RunningWithRetryScheduled", "running", map[string]any{"retry_count": 2, "next_retry_at": "2024-06-19T10:00:49.905Z"}, substate.StateBackingOff, retryAt},
			{"EpochMillis", "backing-off", map[string]any{"next_retry_at": retryAt.UnixMilli()}, substate.StateBackingOff, retryAt},
			{"BackingOffWithout", "backing-off", map[string]any{"retry_count": 2}, substate.StateBackingOff, time.Time{}},
			// A retry time before the row's modified_at is an attempt
			// already started: the row runs, and has no next retry.
			{"RunningRetryPassed", "running", map[string]any{"retry_count": 2, "next_retry_at": "2024-06-19T10:00:40.000Z"}, substate.StateRunning, time.Time{}},
			{"Paused", "paused", map[string]any{"next_retry_at": "2024-06-19T10:00:49.905Z"}, substate.StateError, time.Time{}},
		} {
			got := one(t, substate.RawRestate, restateRow(t, tt.status, tt.set))
			if got.SubState != tt.sub || !got.NextRetryAt.Equal(tt.want) {
				t.Errorf("%s: %s, next retry %v; want %s, %v", tt.name, got.SubState, got.NextRetryAt, tt.sub, tt.want)
			}
		}
	})
	t.Run("StepFunctionsReportsNone", func(t *testing.T) {
		got := one(t, substate.RawStepFunctionsPoll, backingOffPoll(t))
		if got.SubState != substate.StateBackingOff || !got.NextRetryAt.IsZero() {
			t.Errorf("a backing-off poll: %s, next retry %v; want backing-off without one", got.SubState, got.NextRetryAt)
		}
	})
}
