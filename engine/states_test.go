package engine

import (
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

const waitWorkflow = `
name: waiting
version: "1"
startAt: pause
states:
  pause:
    type: Wait
    seconds: 90
    next: until
  until:
    type: Wait
    timestamp: "2030-01-02T03:10:00Z"
    next: past
  past:
    type: Wait
    timestamp: "2000-01-01T00:00:00Z"
    next: done
  done:
    type: Success
`

// TestWait checks Wait by seconds, by timestamp, and a timestamp already
// past, on the manual clock.
func TestWait(t *testing.T) {
	h := newHarness(t)
	h.start(t, waitWorkflow, "w1", `{"keep":"me"}`)
	h.rec.WaitFor(t, "w1", func(ev substate.EngineEvent) bool { return ev.State == "pause" })
	h.sleepers(t, 1)
	h.clock.Advance(89 * time.Second)
	if n := len(h.rec.Events()); n != 1 {
		t.Fatalf("%d events before the wait ended", n)
	}
	h.clock.Advance(time.Second) // 03:05:35
	h.rec.WaitFor(t, "w1", func(ev substate.EngineEvent) bool { return ev.State == "until" })
	h.sleepers(t, 1)
	h.clock.Set(time.Date(2030, 1, 2, 3, 10, 0, 0, time.UTC))
	ev := h.final(t, "w1")
	if ev.Status != substate.EngineSucceeded {
		t.Fatalf("final %+v", ev)
	}
	if got, want := statuses(h.rec.Events(), "w1"), "pause:waiting until:waiting past:waiting done:succeeded"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	if out := h.output(t, "w1"); out["keep"] != "me" {
		t.Errorf("output %v, want the input passed through", out)
	}
	if got, want := string(ev.Output), `{"keep":"me"}`; got != want || ev.OutputSize != len(want) {
		t.Errorf("succeeded event output %s (size %d), want %s", got, ev.OutputSize, want)
	}
}

const failWorkflow = `
name: failing
version: "1"
startAt: stop
states:
  stop:
    type: Fail
    error: OrderProcessingFailed
    cause: Order could not be completed
`

func TestFail(t *testing.T) {
	h := newHarness(t)
	h.start(t, failWorkflow, "f1", `{}`)
	ev := h.final(t, "f1")
	if ev.Status != substate.EngineFailed || ev.ErrorType != "OrderProcessingFailed" || ev.Error != "Order could not be completed" {
		t.Errorf("final %+v", ev)
	}
	if ev.TenantID != "tenant-1" || ev.Workflow != "failing" || !ev.StartedAt.Equal(epoch) {
		t.Errorf("event identity %+v", ev)
	}
}

// TestFailWithOnlyError: a Fail state with an error and no cause fails
// the execution with that error, and the view's message is the error, so
// the tenant shows it has one (--has-error finds it).
func TestFailWithOnlyError(t *testing.T) {
	h := newHarness(t)
	h.start(t, strings.Replace(failWorkflow, "    cause: Order could not be completed\n", "", 1), "f2", `{}`)
	ev := h.final(t, "f2")
	if ev.Status != substate.EngineFailed || ev.ErrorType != "OrderProcessingFailed" || ev.Error != "" {
		t.Fatalf("final %+v", ev)
	}
	mapped := mapOne(t, mapping.New(mapping.Config{}), substate.RawEngine, ev)
	if mapped.ErrorMessage != "OrderProcessingFailed" || mapped.ErrorType != "OrderProcessingFailed" {
		t.Fatalf("mapped error %q (%s), want the error as the message", mapped.ErrorMessage, mapped.ErrorType)
	}
}

const pollWorkflow = `
name: polling
version: "1"
startAt: check
states:
  check:
    type: Task
    resource: svc.check
    next: ready
  ready:
    type: Choice
    choices:
      - condition: {variable: $.ready, booleanEquals: true}
        next: done
    default: pause
  pause:
    type: Wait
    seconds: 10
    next: check
  done:
    type: Success
`

// TestPollingLoop runs a loop through a Choice state and checks that each
// visit of the task gets its own idempotency key.
func TestPollingLoop(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	keys := make(chan string, 5)
	natstest.Service(t, h.nc, "svc", "check", func(req micro.Request) {
		keys <- req.Headers().Get(substate.HeaderIdempotencyKey)
		_ = req.RespondJSON(map[string]any{"ready": calls.Add(1) == 3})
	})
	h.start(t, pollWorkflow, "l1", `{}`)
	for i := 0; i < 2; i++ {
		h.sleepers(t, 1)
		h.clock.Advance(10 * time.Second)
	}
	h.final(t, "l1")
	want := "check:running pause:waiting check:running pause:waiting check:running done:succeeded"
	if got := statuses(h.rec.Events(), "l1"); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	for _, want := range []string{"l1/1/check/1", "l1/4/check/1", "l1/7/check/1"} {
		if got := <-keys; got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

// catchLoopWorkflow polls a task until it succeeds: its catch leads to a
// Wait that loops back to it, its next leads out.
const catchLoopWorkflow = `
name: catch_loop
version: "1"
startAt: poll
states:
  poll:
    type: Task
    resource: svc.ready
    next: done
    catch:
      - errorType: NotReady
        next: pause
  pause:
    type: Wait
    seconds: 30
    next: poll
  done:
    type: Success
`

// TestCatchLoop runs the polling loop through catch: two NotReady replies,
// each caught and waited out, then a success that leaves the loop. Each
// time the loop enters the failed task again is a retry of its failure
// (docs/state-mapping.md), so the retry count goes 0, 1, 2.
func TestCatchLoop(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	natstest.Service(t, h.nc, "svc", "ready", func(req micro.Request) {
		if calls.Add(1) < 3 {
			_ = req.Error("NotReady", "still provisioning", nil)
			return
		}
		_ = req.RespondJSON(map[string]any{"ready": true})
	})
	h.start(t, catchLoopWorkflow, "c1", `{}`)
	for range 2 {
		h.sleepers(t, 1)
		h.clock.Advance(30 * time.Second)
	}
	if ev := h.final(t, "c1"); ev.Status != substate.EngineSucceeded {
		t.Fatalf("final %+v", ev)
	}
	want := "poll:running poll:error pause:waiting poll:running poll:error pause:waiting poll:running done:succeeded"
	if got := statuses(h.rec.Events(), "c1"); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	var retries []int
	for _, ev := range h.rec.Events() {
		if ev.ExecutionID == "c1" && ev.Status == substate.EngineRunning {
			retries = append(retries, ev.RetryCount)
		}
	}
	if got := fmt.Sprint(retries); got != "[0 1 2]" {
		t.Errorf("retry counts of the attempts = %s, want [0 1 2]: each visit after a caught failure is a retry", got)
	}
}
