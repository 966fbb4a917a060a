package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

func TestRetryDelay(t *testing.T) {
	p := retryPolicy{initial: time.Second, multiplier: 2}
	capped := retryPolicy{initial: time.Second, multiplier: 3, maxDelay: 5 * time.Second}
	for _, tc := range []struct {
		name   string
		p      retryPolicy
		n      int
		jitter float64
		want   time.Duration
	}{
		{"First", p, 1, 0, time.Second},
		{"Second", p, 2, 0, 2 * time.Second},
		{"Third", p, 3, 0, 4 * time.Second},
		{"Capped", capped, 3, 0, 5 * time.Second},
		{"JitterMid", p, 2, 0.5, 2200 * time.Millisecond},
		{"JitterHigh", p, 2, 1, 2400 * time.Millisecond},
		{"JitterNeverAboveCap", capped, 3, 1, 5 * time.Second},
		{"JitterNeverBelowDelay", p, 1, 0, time.Second},
		{"JitterUnderCap", capped, 2, 0.999, 3599400 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.delay(tc.n, tc.jitter); got != tc.want {
				t.Errorf("delay(%d, %v) = %v, want %v", tc.n, tc.jitter, got, tc.want)
			}
		})
	}
}

// TestRetryNeverBeforeItsDelay: whatever the jitter, retry n waits at
// least initialDelaySeconds × backoffMultiplier^(n-1) (capped), never
// less (a first retry of a 1 s delay once waited 0.81 s).
func TestRetryNeverBeforeItsDelay(t *testing.T) {
	p := retryPolicy{initial: time.Second, multiplier: 2, maxDelay: 10 * time.Second}
	for n := 1; n <= 6; n++ {
		want := min(time.Second<<(n-1), 10*time.Second)
		for i := range 1000 {
			j := float64(i) / 1000
			if got := p.delay(n, j); got < want || got > want*6/5 {
				t.Fatalf("delay(%d, %v) = %v, want %v to %v", n, j, got, want, want*6/5)
			}
		}
	}
}

const retryWorkflow = `
name: retrying
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.work
    next: done
    retry:
      maxAttempts: 2
      initialDelaySeconds: 1
      backoffMultiplier: 3
      maxDelaySeconds: 60
    catch:
      - errorType: NotThisOne
        next: done
      - errorType: "*"
        next: handle
  handle:
    type: Task
    resource: svc.handle
    next: done
  done:
    type: Success
`

// TestRetryThenCatch checks backoff delays on the manual clock, the events
// of each attempt, idempotency keys and that catch runs only after retries.
func TestRetryThenCatch(t *testing.T) {
	h := newHarness(t)
	keys := make(chan string, 10)
	natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
		keys <- req.Headers().Get(substate.HeaderIdempotencyKey)
		_ = req.Error("Boom", "it broke", nil)
	})
	handled := make(chan micro.Request, 1)
	natstest.Service(t, h.nc, "svc", "handle", echo(map[string]any{"handled": true}, handled))
	h.start(t, retryWorkflow, "r1", `{"orderId":"o-1"}`)

	for retry, delay := range []time.Duration{time.Second, 3 * time.Second} {
		ev := h.rec.WaitFor(t, "r1", func(ev substate.EngineEvent) bool {
			return ev.Status == substate.EngineBackingOff && ev.RetryCount == retry+1
		})
		if got, want := ev.NextRetryAt, h.clock.Now().Add(delay); !got.Equal(want) {
			t.Fatalf("retry %d: next retry at %v, want %v", retry+1, got, want)
		}
		if ev.ErrorType != "Boom" || ev.Error != "it broke" {
			t.Errorf("backing-off event %+v lacks the error", ev)
		}
		h.clock.Advance(delay - time.Millisecond)
		if n := len(keys); n != retry+1 {
			t.Fatalf("%d attempts before the delay passed, want %d", n, retry+1)
		}
		h.clock.Advance(time.Millisecond)
	}
	h.final(t, "r1")
	want := "work:running work:error work:backing-off work:running work:error work:backing-off work:running work:error handle:running done:succeeded"
	if got := statuses(h.rec.Events(), "r1"); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	for i, want := range []string{"r1/1/work/1", "r1/1/work/2", "r1/1/work/3"} {
		if got := <-keys; got != want {
			t.Errorf("attempt %d key %q, want %q", i+1, got, want)
		}
	}
	var input struct {
		OrderID string    `json:"orderId"`
		Error   TaskError `json:"error"`
	}
	if err := json.Unmarshal((<-handled).Data(), &input); err != nil {
		t.Fatal(err)
	}
	if input.OrderID != "o-1" || input.Error != (TaskError{Type: "Boom", Message: "it broke"}) {
		t.Errorf("catcher input %+v, want the state input plus the error", input)
	}
	checkSeqs(t, h.rec.Events(), "r1")
	// Retries count for the whole execution: the catcher's task and the end
	// still report the two retries, so a failed run keeps them for audit.
	var counts []string
	for _, ev := range h.rec.Events() {
		if ev.ExecutionID == "r1" {
			counts = append(counts, fmt.Sprint(ev.RetryCount))
		}
	}
	if got, want := strings.Join(counts, " "), "0 0 1 1 1 2 2 2 2 2"; got != want {
		t.Errorf("retry counts %s, want %s", got, want)
	}
}

// checkSeqs checks that an execution's events are numbered 1, 2, 3… with
// matching ids, once each.
func checkSeqs(t *testing.T, events []substate.EngineEvent, name string) {
	t.Helper()
	var seq uint64
	for _, ev := range events {
		if ev.ExecutionID != name {
			continue
		}
		seq++
		if ev.Seq != seq || ev.ID != substate.EngineEventID(name, seq) {
			t.Errorf("event %d: seq %d id %q", seq, ev.Seq, ev.ID)
		}
	}
}

const matchWorkflow = `
name: matching
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.work
    next: done
    retry:
      errorTypes: [Transient]
      maxAttempts: 5
    catch:
      - errorType: Permanent
        next: permanent
  permanent:
    type: Fail
    error: GaveUp
  done:
    type: Success
`

// TestRetryMatching checks that only listed error types are retried.
func TestRetryMatching(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
		if calls.Add(1) == 1 {
			_ = req.Error("Transient", "try again", nil)
			return
		}
		_ = req.Error("Permanent", "no", nil)
	})
	h.start(t, matchWorkflow, "m1", `{}`)
	h.rec.WaitFor(t, "m1", natstest.Status(substate.EngineBackingOff))
	h.clock.Advance(time.Second)
	ev := h.final(t, "m1")
	want := "work:running work:error work:backing-off work:running work:error permanent:failed"
	if got := statuses(h.rec.Events(), "m1"); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	if ev.ErrorType != "GaveUp" {
		t.Errorf("error type %q, want GaveUp", ev.ErrorType)
	}
}

const plainTask = `
name: plain
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.%s
    next: done
    timeout: 0.2
  done:
    type: Success
`

// TestTaskErrors checks each way a task can fail and the error it raises.
func TestTaskErrors(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, typ, msg string
		handler        micro.HandlerFunc
	}{
		{"MicroError", "PaymentError", "card declined", func(r micro.Request) { _ = r.Error("PaymentError", "card declined", nil) }},
		{"MicroNumericCode", ErrTaskFailed, "boom", func(r micro.Request) { _ = r.Error("500", "boom", nil) }},
		{"MicroErrorBody", "Declined", "insufficient funds", func(r micro.Request) {
			_ = r.Error("400", "bad", []byte(`{"errorType":"Declined","message":"insufficient funds"}`))
		}},
		{"ErrorBody", "OutOfStock", "sku a", func(r micro.Request) {
			_ = r.RespondJSON(map[string]string{"errorType": "OutOfStock", "message": "sku a"})
		}},
		{"InvalidOutput", ErrInvalidOutput, "", func(r micro.Request) { _ = r.Respond([]byte("not json")) }},
		{"Timeout", ErrTimeout, "", func(r micro.Request) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natstest.Service(t, h.nc, "svc", tc.name, tc.handler)
			h.start(t, sprintf(plainTask, tc.name), tc.name, `{}`)
			ev := h.final(t, tc.name)
			if ev.Status != substate.EngineFailed || ev.ErrorType != tc.typ || (tc.msg != "" && ev.Error != tc.msg) {
				t.Errorf("final event %s %q %q, want failed %q %q", ev.Status, ev.ErrorType, ev.Error, tc.typ, tc.msg)
			}
			if got, want := statuses(h.rec.Events(), tc.name), "work:running work:error work:failed"; got != want {
				t.Errorf("events %q, want %q", got, want)
			}
		})
	}
}

// TestServiceUnavailable checks that a missing task service is retried
// even without a retry block, and the execution goes on once it appears.
func TestServiceUnavailable(t *testing.T) {
	h := newHarness(t)
	h.start(t, sprintf(plainTask, "late"), "u1", `{}`)
	ev := h.rec.WaitFor(t, "u1", natstest.Status(substate.EngineBackingOff))
	if ev.ErrorType != ErrServiceUnavailable || ev.RetryCount != 1 || !ev.NextRetryAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("backing-off event %+v", ev)
	}
	natstest.Service(t, h.nc, "svc", "late", echo(map[string]any{"ok": true}, nil))
	h.clock.Advance(time.Second)
	if ev := h.final(t, "u1"); ev.Status != substate.EngineSucceeded {
		t.Fatalf("final %+v", ev)
	}
	running := h.rec.WaitFor(t, "u1", func(ev substate.EngineEvent) bool { return ev.Status == substate.EngineRunning && ev.Attempt == 2 })
	if running.RetryCount != 1 {
		t.Errorf("second attempt retry count %d, want 1", running.RetryCount)
	}
}

// TestPublishRetried checks that a refused emission is retried and the
// engine does not move on before it is acknowledged.
func TestPublishRetried(t *testing.T) {
	h := newHarness(t)
	var refusals atomic.Int32
	h.rec.Fail = func(ev substate.EngineEvent) error {
		if ev.Status == substate.EngineRunning && refusals.Add(1) <= 2 {
			return errors.New("nats away")
		}
		return nil
	}
	calls := make(chan micro.Request, 1)
	natstest.Service(t, h.nc, "svc", "work", echo(nil, calls))
	h.start(t, taskThenSuccess, "p1", `{}`)
	h.final(t, "p1")
	if got, want := statuses(h.rec.Events(), "p1"), "work:running done:succeeded"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	if refusals.Load() < 3 || len(calls) != 1 {
		t.Errorf("refusals %d, calls %d", refusals.Load(), len(calls))
	}
	checkSeqs(t, h.rec.Events(), "p1")
}
