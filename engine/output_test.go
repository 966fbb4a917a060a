package engine

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

// TestOutputBounded checks that an output larger than
// substate.MaxEngineOutput stays in the execution record and is left out
// of the succeeded event, which says its size.
func TestOutputBounded(t *testing.T) {
	h := newHarness(t)
	big := strings.Repeat("x", substate.MaxEngineOutput)
	natstest.Service(t, h.nc, "svc", "op", func(req micro.Request) {
		_ = req.RespondJSON(map[string]any{"blob": big})
	})
	h.start(t, base, "o1", `{}`)
	ev := h.final(t, "o1")
	if ev.Status != substate.EngineSucceeded {
		t.Fatalf("final %+v", ev)
	}
	if out := h.output(t, "o1"); out["blob"] != big {
		t.Fatalf("record output lost the blob")
	}
	if ev.Output != nil || ev.OutputSize != len(`{"blob":""}`)+len(big) {
		t.Errorf("event output %d bytes, size %d; want none and the size", len(ev.Output), ev.OutputSize)
	}
}
