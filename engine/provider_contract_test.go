package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/natstest"
)

// providerUnderTest is one engine.Provider implementation with what the
// contract needs to drive it: a definition in its own language that stays
// running until stopped, and an execution id it does not know.
type providerUnderTest struct {
	provider   engine.Provider
	definition string
	unknownID  func(workflow string) string
	step       string // the step Describe tells while it runs; "" when it cannot tell
}

// TestProviderContract runs the same checks against both providers: the
// built-in engine and Step Functions (the real SDK client against the local
// AWS server). Describe's raw evidence is mapped by the mapping package,
// as the normalizer maps it.
func TestProviderContract(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) providerUnderTest{
		"Engine":        openEngine,
		"StepFunctions": openStepFunctions,
	} {
		t.Run(name, func(t *testing.T) { testProviderContract(t, open(t)) })
	}
}

func testProviderContract(t *testing.T, p providerUnderTest) {
	ctx := context.Background()
	w := engine.Workflow{Name: "orders", Definition: []byte(p.definition)}
	ref, err := p.provider.EnsureWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.provider.EnsureWorkflow(ctx, w); err != nil || again != ref {
		t.Fatalf("second EnsureWorkflow = %q, %v; want %q", again, err, ref)
	}
	req := engine.StartRequest{Workflow: ref, Name: "c-1", TenantID: "t-1", Input: json.RawMessage(`{"orderId":"o-1"}`)}
	x, err := p.provider.Start(ctx, req)
	if err != nil || x.Existing || x.ID == "" {
		t.Fatalf("Start = %+v, %v; want a new execution", x, err)
	}
	t.Run("StartIdempotent", func(t *testing.T) {
		again, err := p.provider.Start(ctx, req)
		if err != nil || !again.Existing || again.ID != x.ID {
			t.Fatalf("second Start = %+v, %v; want the existing %s", again, err, x.ID)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		other := req
		other.Input = json.RawMessage(`{"orderId":"o-2"}`)
		_, err := p.provider.Start(ctx, other)
		wantCode(t, err, substate.ECONFLICT)
	})
	t.Run("Describe", func(t *testing.T) {
		ev := describe(t, p.provider, x.ID)
		if ev.TenantID != "t-1" || ev.ExecutionID != x.ID || ev.Provider != p.provider.Name() || ev.SubState.Terminal() {
			t.Fatalf("described = tenant %s, execution %s, provider %s, %s; want t-1, %s, %s, not terminal",
				ev.TenantID, ev.ExecutionID, ev.Provider, ev.SubState, x.ID, p.provider.Name())
		}
		if ev.Step != p.step {
			t.Errorf("described step %q, want %q", ev.Step, p.step)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := p.provider.Describe(ctx, p.unknownID(ref))
		wantCode(t, err, substate.ENOTFOUND)
	})
	t.Run("Stop", func(t *testing.T) {
		if err := p.provider.Stop(ctx, x.ID, "Cancelled", "operator asked"); err != nil {
			t.Fatal(err)
		}
		var ev substate.EventData
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if ev = describe(t, p.provider, x.ID); ev.SubState == substate.StateFailed || time.Now().After(deadline) {
				break
			}
		}
		if ev.SubState != substate.StateFailed || ev.Verb != substate.VerbCancelled || ev.ErrorMessage == "" {
			t.Fatalf("after Stop: %s/%s, error %q; want failed/cancelled with the cause", ev.SubState, ev.Verb, ev.ErrorMessage)
		}
	})
	t.Run("DeleteWorkflow", func(t *testing.T) {
		if err := p.provider.DeleteWorkflow(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if again, err := p.provider.EnsureWorkflow(ctx, w); err != nil || again != ref {
			t.Fatalf("EnsureWorkflow after delete = %q, %v; want %q", again, err, ref)
		}
	})
}

// describe describes an execution and maps the raw evidence.
func describe(t *testing.T, p engine.Provider, id string) substate.EventData {
	t.Helper()
	st, err := p.Describe(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	events, err := mapping.New(mapping.Config{}).Map(st.Raw)
	if err != nil || len(events) != 1 {
		t.Fatalf("map %s %s: %d events, %v", st.Raw.Kind, st.Raw.Body, len(events), err)
	}
	return events[0]
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := substate.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
}

// openEngine opens a built-in engine on an embedded NATS server.
func openEngine(t *testing.T) providerUnderTest {
	ns := natstest.Server(t)
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher = natstest.Conn(t, ns), &natstest.Recorder{}
	e.Clock, e.Logger, e.ServeControl = engine.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), slog.New(slog.DiscardHandler), false
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return providerUnderTest{
		provider:   e,
		definition: "name: orders\nversion: \"1\"\nstartAt: hold\nstates:\n  hold:\n    type: Wait\n    seconds: 3600\n    next: done\n  done:\n    type: Success\n",
		unknownID:  func(string) string { return "nope" },
		step:       "hold",
	}
}

// openStepFunctions returns a Step Functions provider on the local AWS
// server.
func openStepFunctions(t *testing.T) providerUnderTest {
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config())
	p.AccountID, p.RoleARN = awstest.AccountID, "arn:aws:iam::123456789012:role/substate-sfn"
	return providerUnderTest{
		provider:   p,
		definition: `{"StartAt":"Hold","States":{"Hold":{"Type":"Wait","Seconds":3600,"End":true}}}`,
		unknownID:  func(machine string) string { return awstest.ExecutionARN(machine, "nope") },
	}
}
