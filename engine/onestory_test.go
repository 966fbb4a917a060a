package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/testkit/natstest"
)

const twoRetries = `
name: two_retries
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.work
    next: done
    retry:
      maxAttempts: 3
      initialDelaySeconds: 1
      backoffMultiplier: 1
  done:
    type: Success
`

// TestOneStoryOneRetryCount tells one story, a task that fails twice and
// succeeds on its third attempt, as each provider reports it: the engine
// running it for real, a Step Functions history and the sys_invocation rows
// of a Restate invocation in the order a real 1.7.12 server shows them (the
// real-server tests check that order). Mapped to canonical events, the
// three say the same: backing off after the first failure is 1, the retry
// running is still 1, then 2 and 2, then succeeded.
func TestOneStoryOneRetryCount(t *testing.T) {
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "restate:key", "engine:tenant")
	if err != nil {
		t.Fatal(err)
	}
	m := mapping.New(mapping.Config{Tenants: rules})
	const want = "running/0 backing-off/1 running/1 backing-off/2 running/2 succeeded"

	t.Run("Engine", func(t *testing.T) {
		h := newHarness(t)
		var calls atomic.Int32
		natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
			if calls.Add(1) <= 2 {
				_ = req.Error("Busy", "quota service busy", nil)
				return
			}
			_ = req.RespondJSON(map[string]any{"ok": true})
		})
		h.start(t, twoRetries, "story", `{}`)
		for retry := 1; retry <= 2; retry++ {
			h.rec.WaitFor(t, "story", func(ev substate.EngineEvent) bool {
				return ev.Status == substate.EngineBackingOff && ev.RetryCount == retry
			})
			h.clock.Advance(time.Second)
		}
		h.final(t, "story")
		var evs []substate.EventData
		for _, ev := range h.rec.Events() {
			if ev.ExecutionID == "story" {
				evs = append(evs, mapOne(t, m, substate.RawEngine, ev))
			}
		}
		if got := story(evs); got != want {
			t.Errorf("engine: %s\nwant    %s", got, want)
		}
	})
	t.Run("StepFunctions", func(t *testing.T) {
		types := []string{"ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskFailed",
			"TaskScheduled", "TaskStarted", "TaskFailed", "TaskScheduled", "TaskStarted", "TaskSucceeded",
			"TaskStateExited", "SucceedStateEntered", "SucceedStateExited", "ExecutionSucceeded"}
		var evs []substate.EventData
		for n := 3; n <= len(types); n++ {
			status := "RUNNING"
			if types[n-1] == "ExecutionSucceeded" {
				status = "SUCCEEDED"
			}
			evs = append(evs, mapOne(t, m, substate.RawStepFunctionsPoll, sfnPoll(types[:n], status)))
		}
		if got := story(evs); got != want {
			t.Errorf("step functions: %s\nwant          %s", got, want)
		}
	})
	t.Run("Restate", func(t *testing.T) {
		var evs []substate.EventData
		for _, r := range []struct {
			status  string
			attempt int
		}{{"running", 1}, {"backing-off", 1}, {"running", 2}, {"backing-off", 2}, {"running", 3}, {"completed", 0}} {
			row := map[string]any{"id": "inv_1", "target": "Provision/tenant-1/work", "target_service_name": "Provision",
				"target_service_key": "tenant-1", "status": r.status,
				"created_at": "2024-06-19T10:00:41.502Z", "modified_at": "2024-06-19T10:00:41.502Z"}
			if r.attempt > 0 {
				row["retry_count"] = r.attempt
			}
			if r.status == "backing-off" {
				row["last_failure"] = "[500 Internal] quota service busy\nError: quota service busy\n    at work (service.js:1:1)"
			}
			if r.status == "completed" {
				row["completion_result"], row["modified_at"] = "success", "2024-06-19T10:00:44.001Z"
			}
			evs = append(evs, mapOne(t, m, substate.RawRestate, row))
		}
		if got := story(evs); got != want {
			t.Errorf("restate: %s\nwant    %s", got, want)
		}
	})
}

// mapOne maps one raw event given as a value to encode.
func mapOne(t *testing.T, m *mapping.Mapper, kind substate.RawKind, v any) substate.EventData {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := m.Map(substate.RawEvent{Kind: kind, ID: "x", Body: body})
	if err != nil || len(evs) != 1 {
		t.Fatalf("map %s: %v (%d events)", body, err, len(evs))
	}
	return evs[0]
}

// story is the sub-states and retry counts a provider reported, one entry
// per change; the engine's error status between a failure and its backoff
// has no counterpart elsewhere and is left out, and so is the count of
// the terminal status (the view clears it on success).
func story(evs []substate.EventData) string {
	var out []string
	for _, ev := range evs {
		if ev.SubState == substate.StateError {
			continue
		}
		s := fmt.Sprintf("%s/%d", ev.SubState, ev.RetryCount)
		if ev.SubState.Terminal() {
			s = string(ev.SubState)
		}
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// sfnPoll is a poll payload of an execution whose history holds events of
// the given types, oldest first; "TaskStateEntered:name" enters a state.
func sfnPoll(types []string, status string) map[string]any {
	start := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	events := make([]map[string]any, len(types))
	for i, typ := range types {
		typ, state, _ := strings.Cut(typ, ":") // "TaskStateEntered:poll" enters the state poll
		events[i] = map[string]any{"id": i + 1, "previousEventId": i, "type": typ, "timestamp": float64(start.Unix() + int64(i))}
		if state != "" {
			events[i]["stateEnteredEventDetails"] = map[string]any{"name": state}
		}
		if typ == "TaskFailed" {
			events[i]["taskFailedEventDetails"] = map[string]any{"error": "Busy", "cause": `{"errorMessage":"quota service busy"}`}
		}
	}
	return map[string]any{
		"execution": map[string]any{"executionArn": "arn:aws:states:us-east-1:123456789012:execution:sm:story",
			"stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:sm", "name": "story",
			"status": status, "startDate": float64(start.Unix()), "input": `{"tenantId":"tenant-1"}`},
		"history":  map[string]any{"events": events},
		"polledAt": start.Add(time.Minute),
	}
}

// TestOneStoryPollingLoop tells the polling-loop story, a task whose
// NotReady failure a catch takes to a Wait and back to the task, twice,
// before it succeeds, as the engine running it for real and a Step
// Functions history report it: every attempt after the first is a retry
// of the caught failure, so the attempts carry the retry counts 0, 1, 2
// on both (docs/state-mapping.md), and a tenant stuck in such a loop is
// found by its retry count.
func TestOneStoryPollingLoop(t *testing.T) {
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "engine:tenant")
	if err != nil {
		t.Fatal(err)
	}
	m := mapping.New(mapping.Config{Tenants: rules})
	const want = "[0 1 2]"
	t.Run("Engine", func(t *testing.T) {
		h := newHarness(t)
		var calls atomic.Int32
		natstest.Service(t, h.nc, "svc", "ready", func(req micro.Request) {
			if calls.Add(1) < 3 {
				_ = req.Error("NotReady", "still provisioning", nil)
				return
			}
			_ = req.RespondJSON(map[string]any{"ready": true})
		})
		h.start(t, catchLoopWorkflow, "loop", `{}`)
		for range 2 {
			h.sleepers(t, 1)
			h.clock.Advance(30 * time.Second)
		}
		h.final(t, "loop")
		var counts []int
		for _, ev := range h.rec.Events() {
			if ev.ExecutionID == "loop" && ev.Status == substate.EngineRunning {
				counts = append(counts, mapOne(t, m, substate.RawEngine, ev).RetryCount)
			}
		}
		if got := fmt.Sprint(counts); got != want {
			t.Errorf("engine attempts' retry counts %s, want %s", got, want)
		}
	})
	t.Run("StepFunctions", func(t *testing.T) {
		attempt := []string{"TaskStateEntered:poll", "TaskScheduled", "TaskStarted"}
		wait := []string{"TaskFailed", "WaitStateEntered:pause", "WaitStateExited"}
		types := append([]string{"ExecutionStarted"}, attempt...)
		types = append(append(append(types, wait...), attempt...), wait...)
		types = append(append(types, attempt...), "TaskSucceeded", "TaskStateExited")
		var counts []int
		for n := range types {
			if types[n] == "TaskStarted" {
				counts = append(counts, mapOne(t, m, substate.RawStepFunctionsPoll, sfnPoll(types[:n+1], "RUNNING")).RetryCount)
			}
		}
		if got := fmt.Sprint(counts); got != want {
			t.Errorf("step functions attempts' retry counts %s, want %s", got, want)
		}
	})
}
