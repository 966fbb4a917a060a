package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

const timeoutWorkflow = `
name: bounded
version: "1"
timeout: 100
startAt: pause
states:
  pause:
    type: Wait
    seconds: 1000
    next: done
  done:
    type: Success
`

func TestParseTimeout(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		d, err := Parse("wf.yaml", []byte(timeoutWorkflow))
		if err != nil {
			t.Fatal(err)
		}
		if d.Timeout != 100*time.Second {
			t.Errorf("timeout %v, want 100s", d.Timeout)
		}
	})
	for _, tc := range []struct{ name, value, want string }{
		{"ErrZero", "0", `wf.yaml:4:10: timeout must be a positive number of seconds`},
		{"ErrText", "soon", `wf.yaml:4:10: timeout must be a number, not "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(timeoutWorkflow, "timeout: 100", "timeout: "+tc.value, 1)
			if got := errText(parseErr(src)); !strings.Contains(got, tc.want) {
				t.Errorf("errors:\n%s\nwant %s", got, tc.want)
			}
		})
	}
}

func parseErr(src string) error {
	_, err := Parse("wf.yaml", []byte(src))
	return err
}

// TestWorkflowTimeout ends an execution waiting in a Wait state when the
// workflow's timeout passes, on the manual clock.
func TestWorkflowTimeout(t *testing.T) {
	h := newHarness(t)
	h.start(t, timeoutWorkflow, "t1", `{}`)
	h.rec.WaitFor(t, "t1", natstest.Status(substate.EngineWaiting))
	h.sleepers(t, 2) // the Wait and the timeout
	h.clock.Advance(99 * time.Second)
	h.sleepers(t, 2)
	if n := len(h.rec.Events()); n != 1 {
		t.Fatalf("%d events before the timeout: %s", n, natstest.Summary(h.rec.Events()))
	}
	h.clock.Advance(time.Second)
	ev := h.final(t, "t1")
	if ev.Status != substate.EngineFailed || ev.ErrorType != ErrTimeout || ev.State != "pause" {
		t.Fatalf("final %+v, want failed with %s in pause", ev, ErrTimeout)
	}
	if want := "the workflow did not finish within its timeout of 1m40s"; ev.Error != want {
		t.Errorf("error %q, want %q", ev.Error, want)
	}
	if got, want := statuses(h.rec.Events(), "t1"), "pause:waiting pause:failed"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

const timeoutTaskWorkflow = `
name: bounded_task
version: "1"
timeout: 10
startAt: work
states:
  work:
    type: Task
    resource: svc.slow
    next: done
    timeout: 3600
    retry:
      maxAttempts: 5
    catch:
      - errorType: "*"
        next: recover
  recover:
    type: Success
  done:
    type: Success
`

// TestWorkflowTimeoutNotCaught ends an execution whose task attempt is in
// flight when the timeout passes: the attempt is abandoned, and neither the
// task's retry nor its catch applies.
func TestWorkflowTimeoutNotCaught(t *testing.T) {
	h := newHarness(t)
	inFlight := make(chan struct{}, 1)
	natstest.Service(t, h.nc, "svc", "slow", func(req micro.Request) {
		inFlight <- struct{}{} // and never replies
	})
	h.start(t, timeoutTaskWorkflow, "t2", `{}`)
	<-inFlight
	h.sleepers(t, 1) // the timeout
	h.clock.Advance(10 * time.Second)
	ev := h.final(t, "t2")
	if ev.Status != substate.EngineFailed || ev.ErrorType != ErrTimeout || ev.State != "work" {
		t.Fatalf("final %+v, want failed with %s in work", ev, ErrTimeout)
	}
	if got, want := statuses(h.rec.Events(), "t2"), "work:running work:failed"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestWorkflowTimeoutResume closes the engine mid-wait: the new engine
// keeps the deadline of the first, so the execution gets only the time left.
func TestWorkflowTimeoutResume(t *testing.T) {
	h := newHarness(t)
	h.start(t, timeoutWorkflow, "t3", `{}`)
	h.rec.WaitFor(t, "t3", natstest.Status(substate.EngineWaiting))
	_ = h.eng.Close()
	h.clock.Advance(40 * time.Second) // down for 40 of its 100 seconds
	h.open(t)
	h.sleepers(t, 2)
	h.clock.Advance(59 * time.Second)
	h.sleepers(t, 2)
	if n := len(h.rec.Events()); n != 1 {
		t.Fatalf("%d events before the timeout: %s", n, natstest.Summary(h.rec.Events()))
	}
	h.clock.Advance(time.Second)
	if ev := h.final(t, "t3"); ev.ErrorType != ErrTimeout || !ev.Time.Equal(epoch.Add(100*time.Second)) {
		t.Fatalf("final %+v, want %s at start + 100s", ev, ErrTimeout)
	}
}

// TestWorkflowTimeoutPassedWhileDown reopens the engine after the deadline:
// the execution times out at once.
func TestWorkflowTimeoutPassedWhileDown(t *testing.T) {
	h := newHarness(t)
	h.start(t, timeoutWorkflow, "t4", `{}`)
	h.rec.WaitFor(t, "t4", natstest.Status(substate.EngineWaiting))
	_ = h.eng.Close()
	h.clock.Advance(time.Hour)
	h.open(t)
	if ev := h.final(t, "t4"); ev.ErrorType != ErrTimeout {
		t.Fatalf("final %+v, want %s", ev, ErrTimeout)
	}
}
