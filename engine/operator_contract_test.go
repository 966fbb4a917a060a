package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/natstest"
	"github.com/substatehq/substate/testkit/operatortest"
)

// engineFeatures are what the engine's operator does where providers
// differ: it stops at once with the cause (a kill is a stop), redrives a
// failed or stopped execution, and restarts any execution, running or not.
var engineFeatures = operatortest.Features{
	Provider: substate.ProviderEngine, Kill: true, StopCause: true, RetryFailed: true,
	RestartRunning: true, Input: true,
}

// TestOperatorContract runs the operator contract on the engine, in
// process and through its control endpoints (RemoteOperator), as a worker
// whose engine runs in another process acts on it.
func TestOperatorContract(t *testing.T) {
	t.Run("Engine", func(t *testing.T) {
		operatortest.Run(t, engineFeatures, func(t *testing.T) operatortest.Provider {
			e := openContractEngine(t)
			return e.provider(e.eng)
		})
	})
	t.Run("Remote", func(t *testing.T) {
		operatortest.Run(t, engineFeatures, func(t *testing.T) operatortest.Provider {
			e := openContractEngine(t)
			return e.provider(&engine.RemoteOperator{Conn: e.conn})
		})
	})
}

// Workflows of the contract: one waits an hour, one succeeds, one fails,
// one calls a task that fails the first time it sees an input.
const (
	holdWorkflow = "name: hold\nversion: \"1\"\nstartAt: hold\nstates:\n  hold: {type: Wait, seconds: 3600, next: done}\n  done: {type: Success}\n"
	doneWorkflow = "name: done\nversion: \"1\"\nstartAt: done\nstates:\n  done: {type: Success}\n"
	boomWorkflow = "name: boom\nversion: \"1\"\nstartAt: boom\nstates:\n  boom: {type: Fail, error: Boom, cause: it broke}\n"
	onceWorkflow = "name: once\nversion: \"1\"\nstartAt: call\nstates:\n  call: {type: Task, resource: contract.once, next: done}\n  done: {type: Success}\n"
)

// contractEngine is an engine on an embedded NATS server, with the
// contract's workflows and the task service they call.
type contractEngine struct {
	eng  *engine.Engine
	conn *nats.Conn
	n    atomic.Int64
	refs map[string]string
}

func openContractEngine(t *testing.T) *contractEngine {
	t.Helper()
	ns := natstest.Server(t)
	nc := natstest.Conn(t, ns)
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.Logger = nc, &natstest.Recorder{}, slog.New(slog.DiscardHandler)
	e.Clock = engine.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	var mu sync.Mutex
	seen := map[string]bool{}
	natstest.Service(t, nc, "contract", "once", func(req micro.Request) {
		mu.Lock()
		again := seen[string(req.Data())]
		seen[string(req.Data())] = true
		mu.Unlock()
		if !again {
			_ = req.Error("Closed", "the first call of an input fails", nil)
			return
		}
		_ = req.Respond(req.Data())
	})
	c := &contractEngine{eng: e, conn: nc, refs: map[string]string{}}
	for _, def := range []string{holdWorkflow, doneWorkflow, boomWorkflow, onceWorkflow} {
		ref, err := e.EnsureWorkflow(context.Background(), engine.Workflow{Definition: []byte(def)})
		if err != nil {
			t.Fatal(err)
		}
		c.refs[def] = ref
	}
	return c
}

// start starts an execution of def and waits until ok accepts its
// description.
func (c *contractEngine) start(t *testing.T, def string, ok func(substate.ExecutionInfo) bool) string {
	t.Helper()
	ctx := context.Background()
	n := c.n.Add(1)
	x, err := c.eng.Start(ctx, engine.StartRequest{
		Workflow: c.refs[def], Name: fmt.Sprintf("contract-%d", n), TenantID: fmt.Sprintf("t-%d", n),
		Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(operatortest.Settle); ; time.Sleep(operatortest.Poll) {
		info, err := c.eng.DescribeExecution(ctx, x.ID)
		if err == nil && ok(info) {
			return x.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s: %+v, %v", x.ID, info, err)
		}
	}
}

func (c *contractEngine) provider(op substate.ExecutionOperator) operatortest.Provider {
	running := func(i substate.ExecutionInfo) bool { return !i.Ended && i.Step == "hold" }
	ended := func(i substate.ExecutionInfo) bool { return i.Ended }
	return operatortest.Provider{
		Operator:    op,
		Running:     func(t *testing.T) string { return c.start(t, holdWorkflow, running) },
		Succeeded:   func(t *testing.T) string { return c.start(t, doneWorkflow, ended) },
		Failed:      func(t *testing.T) string { return c.start(t, boomWorkflow, ended) },
		Retryable:   func(t *testing.T) string { return c.start(t, onceWorkflow, ended) },
		UnknownID:   "nope",
		RunningStep: "hold",
	}
}
