package demo_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/testkit/natstest"
)

// TestOrderProcessing runs the specification's complete example end to end:
// embedded NATS with JetStream, the demo micro task services, a durable
// engine, every scenario's events read back from the raw stream.
func TestOrderProcessing(t *testing.T) {
	ns := natstest.Server(t)
	nc := natstest.Conn(t, ns)
	js := natstest.RawStream(t, nc)
	rec := &natstest.Recorder{Forward: js}
	svcs, err := demo.Register(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcs.Stop() })

	clock := engine.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.Clock = nc, rec, clock
	e.Logger = slog.New(slog.DiscardHandler)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	stop := fastForward(clock)
	defer stop()

	ctx := context.Background()
	for _, sc := range demo.Scenarios {
		_, err := engine.RequestStart(ctx, nc, engine.StartCommand{Definition: string(demo.Workflow), Name: sc.Name, TenantID: sc.TenantID, Input: sc.Input})
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
	}
	want := map[string]string{
		"order-happy": "validate_order:running check_inventory:running reserve_inventory:running reserve_inventory:error " +
			"reserve_inventory:backing-off reserve_inventory:running process_payment:running fulfill_order:running order_success:succeeded",
		"order-backorder": "validate_order:running check_inventory:running notify_backorder:running order_failed:failed",
		"order-declined": "validate_order:running check_inventory:running reserve_inventory:running reserve_inventory:error " +
			"reserve_inventory:backing-off reserve_inventory:running process_payment:running process_payment:error " +
			"process_payment:backing-off process_payment:running process_payment:error process_payment:backing-off " +
			"process_payment:running process_payment:error payment_failed:running order_failed:failed",
		"order-invalid": "validate_order:running validate_order:error validate_order:backing-off validate_order:running " +
			"validate_order:error validate_order:backing-off validate_order:running validate_order:error " +
			"validate_order:backing-off validate_order:running validate_order:error order_failed:failed",
		"order-courier-down": "validate_order:running check_inventory:running reserve_inventory:running reserve_inventory:error " +
			"reserve_inventory:backing-off reserve_inventory:running process_payment:running fulfill_order:running " +
			"fulfill_order:error fulfill_order:failed",
	}
	for _, sc := range demo.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			ev := rec.WaitFor(t, sc.Name, natstest.Status(substate.EngineSucceeded, substate.EngineFailed))
			if ev.Status != sc.Outcome || ev.TenantID != sc.TenantID {
				t.Errorf("final %s for %s, want %s for %s", ev.Status, ev.TenantID, sc.Outcome, sc.TenantID)
			}
			if got := trail(js.Events(t), sc.Name); got != want[sc.Name] {
				t.Errorf("events\n%s\nwant\n%s", got, want[sc.Name])
			}
		})
	}
	declined := errorsOf(js.Events(t), "order-declined")
	if !strings.Contains(declined, "PaymentError: card declined") {
		t.Errorf("declined order errors %q lack the real error", declined)
	}

	// The courier is up again for the operator's retry: the order ships.
	before := len(js.Events(t))
	if err := e.RetryExecution(ctx, "order-courier-down"); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "order-courier-down", natstest.Status(substate.EngineSucceeded))
	if got, want := trail(js.Events(t)[before:], "order-courier-down"), "fulfill_order:running order_success:succeeded"; !strings.HasSuffix(got, want) {
		t.Errorf("events after the retry\n%s\nwant them to end with\n%s", got, want)
	}
}

// fastForward moves the clock a minute whenever something sleeps on it, so
// every backoff ends at once; it returns a func that stops it.
func fastForward(clock *engine.ManualClock) func() {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				if clock.Sleepers() > 0 {
					clock.Advance(time.Minute)
				}
			}
		}
	}()
	return func() { close(done) }
}

func trail(events []substate.EngineEvent, name string) string {
	var out []string
	for _, ev := range events {
		if ev.ExecutionID == name {
			out = append(out, ev.State+":"+ev.Status)
		}
	}
	return strings.Join(out, " ")
}

func errorsOf(events []substate.EngineEvent, name string) string {
	var out []string
	for _, ev := range events {
		if ev.ExecutionID == name && ev.Status == substate.EngineError {
			out = append(out, ev.ErrorType+": "+ev.Error)
		}
	}
	return strings.Join(out, "; ")
}

// TestServes checks that the demo services answer every resource of the
// demo workflow, and say so to the discovery `workflow start` runs.
func TestServes(t *testing.T) {
	def, err := engine.Parse("order_processing.yaml", demo.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range def.Resources() {
		if !demo.Serves(r) {
			t.Errorf("Serves(%q) = false", r)
		}
	}
	for _, r := range []string{"orderService.cancel", "nope.validate", "orderService"} {
		if demo.Serves(r) {
			t.Errorf("Serves(%q) = true", r)
		}
	}
	nc := natstest.Conn(t, natstest.Server(t))
	svcs, err := demo.Register(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcs.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if missing, err := engine.UnservedResources(ctx, nc, def); err != nil || len(missing) > 0 {
		t.Errorf("unserved %v, %v; want none", missing, err)
	}
}
