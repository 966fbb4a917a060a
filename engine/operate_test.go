package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

// gateWorkflow's first state waits, its second calls a task that fails
// (no retries) until the test opens the gate.
const gateWorkflow = `
name: gated
version: "1"
startAt: pause
states:
  pause:
    type: Wait
    seconds: 10
    next: call
  call:
    type: Task
    resource: svc.gate
    next: done
  done:
    type: Success
`

// gateService serves svc.gate: it fails with Closed until open is set,
// then echoes its input; keys gets each request's idempotency key (the
// first 64).
func gateService(t *testing.T, h *harness) (open *atomic.Bool, keys chan string) {
	open, keys = new(atomic.Bool), make(chan string, 64)
	natstest.Service(t, h.nc, "svc", "gate", func(req micro.Request) {
		select {
		case keys <- req.Headers().Get(substate.HeaderIdempotencyKey):
		default:
		}
		if !open.Load() {
			_ = req.Error("Closed", "the gate is closed", nil)
			return
		}
		_ = req.Respond(req.Data())
	})
	return open, keys
}

// TestOperateRedrive: a task fails, the execution is described as failed
// and retryable, retry redrives it from the failed state with that state's
// input, under the same id, and it succeeds.
func TestOperateRedrive(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	open, keys := gateService(t, h)
	h.start(t, gateWorkflow, "g1", `{"orderId":"o-1"}`)
	h.sleepers(t, 1)
	h.clock.Advance(10 * time.Second)
	if ev := h.final(t, "g1"); ev.Status != substate.EngineFailed || ev.State != "call" {
		t.Fatalf("final %+v", ev)
	}
	info, err := h.eng.DescribeExecution(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Ended || !info.Retryable || info.Step != "call" || info.Error != "Closed" || info.Cause != "the gate is closed" ||
		info.Attempts != 1 || string(info.Input) != `{"orderId":"o-1"}` || info.ProviderState != substate.EngineFailed {
		t.Fatalf("describe failed: %+v", info)
	}
	open.Store(true)
	before := len(h.rec.Events())
	if err := h.eng.RetryExecution(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	ev := h.rec.WaitFor(t, "g1", func(ev substate.EngineEvent) bool { return ev.Status == substate.EngineSucceeded })
	if got := statuses(h.rec.Events()[before:], "g1"); got != "call:running call:running done:succeeded" {
		t.Errorf("events after the redrive: %s", got)
	}
	if string(ev.Output) != `{"orderId":"o-1"}` {
		t.Errorf("output %s: the failed state's input was not used", ev.Output)
	}
	// A task service that remembers idempotency keys must run the redriven
	// attempt: it is a new visit of the state, not a repeat of the failed one.
	if first, again := <-keys, <-keys; first == again {
		t.Errorf("the redrive repeated the failed attempt's idempotency key %q", first)
	}
}

// TestOperateStopRetryRestart: a stop while waiting is a stopped failure
// with the cause, described as stopped; retry takes the stopped execution
// up again in the state it was stopped in; restart starts a new execution
// for the same tenant. (What every operator does is in
// TestOperatorContract.)
func TestOperateStopRetryRestart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	natstest.Service(t, h.nc, "svc", "gate", func(req micro.Request) { _ = req.Respond(req.Data()) })
	h.start(t, gateWorkflow, "s1", `{"n":1}`)
	h.sleepers(t, 1)
	if err := h.eng.StopExecution(ctx, "s1", substate.StopOptions{Cause: "wrong tenant"}); err != nil {
		t.Fatal(err)
	}
	ev := h.final(t, "s1")
	if !ev.Stopped || ev.Error != "wrong tenant" || ev.ErrorType != ErrStopped {
		t.Fatalf("stopped event %+v", ev)
	}
	if info, _ := h.eng.DescribeExecution(ctx, "s1"); info.ProviderState != "stopped" || !info.Retryable {
		t.Errorf("describe stopped: %+v", info)
	}

	if err := h.eng.RetryExecution(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	h.rec.WaitFor(t, "s1", func(ev substate.EngineEvent) bool { return ev.Status == substate.EngineWaiting && ev.Seq > 2 })
	h.sleepers(t, 1)
	h.clock.Advance(10 * time.Second)
	if ev := h.rec.WaitFor(t, "s1", natstest.Status(substate.EngineSucceeded)); ev.Stopped || ev.Error != "" {
		t.Errorf("redriven final %+v", ev)
	}

	id, err := h.eng.RestartExecution(ctx, "s1")
	if err != nil || id == "s1" {
		t.Fatalf("restart: %q %v", id, err)
	}
	info, err := h.eng.DescribeExecution(ctx, id)
	if err != nil || string(info.Input) != `{"n":1}` || info.TenantID != "tenant-1" || info.Workflow != "gated" {
		t.Fatalf("restarted: %+v %v", info, err)
	}
}

// caughtWorkflow's task error is caught into a Fail state.
const caughtWorkflow = `
name: caught
version: "1"
startAt: call
states:
  call:
    type: Task
    resource: svc.gate
    next: done
    catch:
      - errorType: "*"
        next: giveUp
  giveUp:
    type: Fail
    error: OrderFailed
    cause: the order could not be completed
  done:
    type: Success
`

// TestOperateRedriveFromCatch: an execution that failed in a Fail state
// reached through a catch is retried from the task whose error was
// caught, with that task's input, not from the Fail state.
func TestOperateRedriveFromCatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	open, _ := gateService(t, h)
	h.start(t, caughtWorkflow, "c1", `{"orderId":"o-9"}`)
	if ev := h.final(t, "c1"); ev.Status != substate.EngineFailed || ev.State != "giveUp" {
		t.Fatalf("final %+v", ev)
	}
	open.Store(true)
	if err := h.eng.RetryExecution(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	ev := h.rec.WaitFor(t, "c1", natstest.Status(substate.EngineSucceeded))
	if ev.State != "done" || string(ev.Output) != `{"orderId":"o-9"}` {
		t.Fatalf("redriven final %+v output %s", ev, ev.Output)
	}
}

// TestRemoteOperatorWithoutEngine: with no engine serving the control
// endpoints, the remote operator says the engine is unavailable. (What
// it does with one is in TestOperatorContract.)
func TestRemoteOperatorWithoutEngine(t *testing.T) {
	h := newHarness(t)
	op := &RemoteOperator{Conn: h.nc}
	if _, err := op.DescribeExecution(context.Background(), "r1"); substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("no engine: %v", err)
	}
}

// TestOperateConcurrentRetries: of two retries at once, one redrives the
// execution and the other is refused, at once, as it is running again.
func TestOperateConcurrentRetries(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	natstest.Service(t, h.nc, "svc", "gate", func(req micro.Request) { _ = req.Respond(req.Data()) })
	h.start(t, gateWorkflow, "cr1", `{}`)
	h.sleepers(t, 1)
	if err := h.eng.StopExecution(ctx, "cr1", substate.StopOptions{Cause: "stop"}); err != nil {
		t.Fatal(err)
	}
	h.final(t, "cr1")
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- h.eng.RetryExecution(ctx, "cr1") }()
	}
	var ok, conflict int
	for range 2 {
		switch err := <-errs; substate.ErrorCode(err) {
		case "":
			ok++
		case substate.ECONFLICT:
			conflict++
		default:
			t.Fatalf("retry: %v", err)
		}
	}
	if ok != 1 || conflict != 1 {
		t.Fatalf("%d retries done, %d refused; want one of each", ok, conflict)
	}
}

// TestOperateRetryUnpublished: a retry of an execution that ended while
// NATS refuses its last event returns when its context ends, instead of
// waiting for NATS (and holding up every other action); once the event is
// out the retry goes through.
func TestOperateRetryUnpublished(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	gateService(t, h)
	var down atomic.Bool
	down.Store(true)
	h.rec.Fail = func(ev substate.EngineEvent) error {
		if ev.Status == substate.EngineFailed && down.Load() {
			return errors.New("nats away")
		}
		return nil
	}
	h.start(t, gateWorkflow, "u1", `{}`)
	h.sleepers(t, 1)
	h.clock.Advance(10 * time.Second)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if info, err := h.eng.DescribeExecution(ctx, "u1"); err == nil && info.Ended {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("execution not ended: %+v %v", info, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		done <- h.eng.RetryExecution(short, "u1")
	}()
	select {
	case err := <-done:
		if substate.ErrorCode(err) != substate.EUNAVAILABLE || !strings.Contains(err.Error(), "not published yet") {
			t.Fatalf("retry while the last event is unpublished: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("retry waits for NATS beyond its context")
	}
	down.Store(false)
	h.final(t, "u1")
	if err := h.eng.RetryExecution(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	h.rec.WaitFor(t, "u1", func(ev substate.EngineEvent) bool {
		return ev.Status == substate.EngineRunning && ev.State == "call" && ev.Seq > 3
	})
}
