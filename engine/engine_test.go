package engine

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

const taskThenSuccess = `
name: one_task
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.work
    next: done
  done:
    type: Success
`

func TestTask(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		h := newHarness(t)
		seen := make(chan micro.Request, 1)
		natstest.Service(t, h.nc, "svc", "work", echo(map[string]any{"result": 42}, seen))
		h.start(t, taskThenSuccess, "x1", `{"orderId":"o-1"}`)
		ev := h.final(t, "x1")
		if got, want := ev.Status, substate.EngineSucceeded; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
		req := <-seen
		if got, want := req.Headers().Get(substate.HeaderIdempotencyKey), "x1/1/work/1"; got != want {
			t.Errorf("idempotency key %q, want %q", got, want)
		}
		if got, want := string(req.Data()), `{"orderId":"o-1"}`; got != want {
			t.Errorf("body %s, want %s", got, want)
		}
		out := h.output(t, "x1")
		if out["orderId"] != "o-1" || out["result"] == nil {
			t.Errorf("output %v, want input merged with the task output", out)
		}
		if got, want := statuses(h.rec.Events(), "x1"), "work:running done:succeeded"; got != want {
			t.Errorf("events %q, want %q", got, want)
		}
	})
	t.Run("Parameters", func(t *testing.T) {
		h := newHarness(t)
		seen := make(chan micro.Request, 1)
		natstest.Service(t, h.nc, "svc", "work", echo(map[string]any{"charged": true}, seen))
		def := strings.Replace(taskThenSuccess, "next: done", "next: done\n    parameters:\n      sku.$: $.items[1].sku\n      currency: EUR", 1)
		h.start(t, def, "x2", `{"items":[{"sku":"a"},{"sku":"b"}]}`)
		h.final(t, "x2")
		if got, want := string((<-seen).Data()), `{"currency":"EUR","sku":"b"}`; got != want {
			t.Errorf("body %s, want %s", got, want)
		}
		if out := h.output(t, "x2"); out["charged"] != true || out["items"] == nil {
			t.Errorf("output %v", out)
		}
	})
}
