package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

func TestStart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ref, err := h.eng.EnsureWorkflow(ctx, Workflow{Definition: []byte(waitWorkflow)})
	if err != nil || ref != "waiting" {
		t.Fatalf("ensure: %q %v", ref, err)
	}
	req := StartRequest{Workflow: ref, Name: "s1", TenantID: "t", Input: json.RawMessage(`{"a": 1, "b": [2]}`)}
	first, err := h.eng.Start(ctx, req)
	if err != nil || first.Existing || first.ID != "s1" || first.Workflow != "waiting" {
		t.Fatalf("start: %+v %v", first, err)
	}
	t.Run("Idempotent", func(t *testing.T) {
		again := req
		again.Input = json.RawMessage(`{"a":1,"b":[2]}`) // the same JSON, spaced differently
		x, err := h.eng.Start(ctx, again)
		if err != nil || !x.Existing || x.ID != "s1" || !x.StartedAt.Equal(first.StartedAt) {
			t.Fatalf("second start: %+v %v", x, err)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		other := req
		other.Input = json.RawMessage(`{"a":2}`)
		_, err := h.eng.Start(ctx, other)
		if got := substate.ErrorCode(err); got != substate.ECONFLICT {
			t.Fatalf("code %q (%v), want %q", got, err, substate.ECONFLICT)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := h.eng.Start(ctx, StartRequest{Workflow: "nope", Name: "s2"})
		if got := substate.ErrorCode(err); got != substate.ENOTFOUND {
			t.Fatalf("code %q, want %q", got, substate.ENOTFOUND)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, r := range []StartRequest{
			{Workflow: ref, Name: "s3", Input: json.RawMessage(`[1]`)},
			{Workflow: ref, Name: "s3", Input: json.RawMessage(`{`)},
			{Workflow: ref, Name: "a/b"},
			{Workflow: ""},
		} {
			if _, err := h.eng.Start(ctx, r); substate.ErrorCode(err) != substate.EINVALID {
				t.Errorf("%+v: err %v, want EINVALID", r, err)
			}
		}
		if _, err := h.eng.EnsureWorkflow(ctx, Workflow{Definition: []byte("name: x\n")}); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("invalid definition: err %v", err)
		}
	})
	t.Run("GeneratedName", func(t *testing.T) {
		x, err := h.eng.Start(ctx, StartRequest{Workflow: ref})
		if err != nil || !strings.HasPrefix(x.ID, "waiting-") {
			t.Fatalf("start: %+v %v", x, err)
		}
	})
}

func TestDescribeAndStop(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.start(t, waitWorkflow, "d1", `{}`)
	h.rec.WaitFor(t, "d1", natstest.Status(substate.EngineWaiting))
	st, err := h.eng.Describe(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	var ev substate.EngineEvent
	if err := json.Unmarshal(st.Raw.Body, &ev); err != nil {
		t.Fatal(err)
	}
	if st.Raw.Kind != substate.RawEngine || st.Raw.ID != "d1/1" || ev.Status != substate.EngineWaiting {
		t.Errorf("describe %+v %+v", st.Raw, ev)
	}
	if _, err := h.eng.Describe(ctx, "nope"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("describe unknown: %v", err)
	}

	if err := h.eng.Stop(ctx, "d1", "Cancelled", "operator asked"); err != nil {
		t.Fatal(err)
	}
	final := h.final(t, "d1")
	if final.Status != substate.EngineFailed || final.ErrorType != "Cancelled" || final.Error != "operator asked" || final.Seq != 2 || !final.Stopped {
		t.Errorf("stopped event %+v", final)
	}
	h.clock.Advance(time.Hour) // the stopped runner must not wake up
	if err := h.eng.Stop(ctx, "d1", "", ""); substate.ErrorCode(err) != substate.ECONFLICT {
		t.Errorf("second stop: %v", err)
	}
	if n := len(h.rec.Events()); n != 2 {
		t.Errorf("%d events, want 2: %s", n, natstest.Summary(h.rec.Events()))
	}
}

func TestDeleteWorkflow(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.start(t, failWorkflow, "del1", `{}`)
	if err := h.eng.DeleteWorkflow(ctx, "failing"); err != nil {
		t.Fatal(err)
	}
	if err := h.eng.DeleteWorkflow(ctx, "failing"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("second delete: %v", err)
	}
	if _, err := h.eng.Start(ctx, StartRequest{Workflow: "failing", Name: "del2"}); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("start after delete: %v", err)
	}
	h.final(t, "del1") // the started execution is not affected
}

// TestControl starts executions through the NATS control endpoint, as the
// CLI does on a running worker.
func TestControl(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := RequestStart(ctx, h.nc, StartCommand{Definition: failWorkflow, Name: "c1"})
	if substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("no engine: %v", err)
	}
	_ = h.eng.Close()
	h.eng = nil
	e := NewEngine(h.path)
	e.Conn, e.Publisher, e.Clock = h.nc, h.rec, h.clock
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })

	t.Run("OK", func(t *testing.T) {
		x, err := RequestStart(ctx, h.nc, StartCommand{Definition: failWorkflow, Name: "c1", TenantID: "t1", Input: json.RawMessage(`{"x":1}`)})
		if err != nil || x.ID != "c1" || x.Workflow != "failing" || x.Existing {
			t.Fatalf("start: %+v %v", x, err)
		}
		if ev := h.final(t, "c1"); ev.TenantID != "t1" {
			t.Errorf("tenant %q", ev.TenantID)
		}
		x, err = RequestStart(ctx, h.nc, StartCommand{Definition: failWorkflow, Name: "c1", TenantID: "t1", Input: json.RawMessage(`{"x":1}`)})
		if err != nil || !x.Existing {
			t.Fatalf("again: %+v %v", x, err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		_, err := RequestStart(ctx, h.nc, StartCommand{Definition: "name: x\nstates: {}\n", Name: "c2"})
		if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), `1:1: missing required field "version"`) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		_, err := RequestStart(ctx, h.nc, StartCommand{Definition: failWorkflow, Name: "c1", TenantID: "t2"})
		if substate.ErrorCode(err) != substate.ECONFLICT {
			t.Fatalf("err %v", err)
		}
	})
}
