package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
)

func TestWorkflowValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "order.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, demo.Workflow, 0o644); err != nil {
		t.Fatal(err)
	}
	broken := "name: broken\nversion: \"1\"\nstartAt: Start\nstates:\n  Start:\n    type: Task\n    resource: svc.op\n    next: Missing\n  Done:\n    type: Success\n"
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "workflow", "validate", good)
	if code != 0 || !strings.Contains(out, good+": ok") {
		t.Fatalf("valid file: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "workflow", "validate", good, bad)
	if want := bad + `:8:11: state "Start": next state "Missing" does not exist`; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("broken file: exit %d, want 1 and %q in\n%s", code, want, out)
	}
	t.Run("RelativePath", func(t *testing.T) {
		t.Chdir(dir)
		code, out, _ := runCLI(t, "workflow", "validate", "bad.yaml")
		if want := "\nbad.yaml:8:11: state \"Start\": "; code != 1 || !strings.Contains("\n"+out, want) {
			t.Fatalf("exit %d, want 1 and the path as given, %q, in\n%s", code, want, out)
		}
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		code, out, _ := runCLI(t, "workflow", "validate", good, filepath.Join(dir, "nope.yaml"))
		if code != 1 || !strings.Contains(out, "nope.yaml") || !strings.Contains(out, good+": ok") {
			t.Fatalf("exit %d, want 1, the good file ok and the missing one named:\n%s", code, out)
		}
	})
}

// orderWorkflow serves the demo's task services on nc until the test ends
// and writes the order workflow to a file, whose path it returns.
func orderWorkflow(tb testing.TB, nc *nats.Conn) string {
	tb.Helper()
	svc, err := demo.Register(nc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Stop() })
	file := filepath.Join(tb.TempDir(), "order.yaml")
	if err := os.WriteFile(file, demo.Workflow, 0o644); err != nil {
		tb.Fatal(err)
	}
	return file
}

func TestWorkflowStartOnEngine(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	file := orderWorkflow(t, w.bus(t).Conn)
	s := demo.Scenarios[1] // backorder: fails without retries
	args := []string{"workflow", "start", file, "--tenant", s.TenantID, "--input", string(s.Input), "--name", s.Name, "--nats-url", w.nats, "--nats-nkey", w.nkey}
	code, out, errOut := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "started "+s.Name) || strings.Contains(errOut, "warning") {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "already started "+s.Name) {
		t.Fatalf("second start: exit %d\n%s", code, out)
	}
	workertest.Eventually(t, func() string {
		code, out, _ := runCLI(t, "tenants", "get", s.TenantID, "--server", w.httpURL, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) || !strings.Contains(out, `"provider": "engine"`) ||
			!strings.Contains(out, `"workflowStep": "order_failed"`) {
			return fmt.Sprintf("tenant %s: %s", s.TenantID, out)
		}
		return ""
	})
	code, _, errOut = runCLI(t, "workflow", "start", file, "--tenant", "x", "--input", "[1]", "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if code != 1 || !strings.Contains(errOut, "JSON object") {
		t.Fatalf("bad input: exit %d %s", code, errOut)
	}
}

// TestWorkflowStartWithoutServices starts the demo workflow on a worker
// that has no task services: the start says which are missing and how to
// serve them; serving them with "workflow demo-services" lets the execution
// succeed, and its output shows in the audit's raw evidence.
func TestWorkflowStartWithoutServices(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "order_processing.yaml")
	if err := os.WriteFile(file, demo.Workflow, 0o644); err != nil {
		t.Fatal(err)
	}
	s := demo.Scenarios[0] // happy: succeeds
	code, out, errOut := runCLI(t, "workflow", "start", file, "--tenant", s.TenantID, "--input", string(s.Input),
		"--name", s.Name, "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if code != 0 || !strings.Contains(out, "started "+s.Name) {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"warning: no task service answers for fulfillmentService.ship, inventoryService.check, inventoryService.reserve, notificationService.backorder, orderService.validate, paymentService.charge, paymentService.reverse\n",
		"substate workflow demo-services --nats-url " + w.nats + " serves them all",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("start said\n%s\nwant %q", errOut, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var served syncBuffer
	done := make(chan int)
	go func() {
		done <- (&Main{Stdout: &served, Stderr: &served}).Run(ctx, []string{"workflow", "demo-services", "--nats-url", w.nats, "--nats-nkey", w.seed(bus.Tasks)})
	}()
	t.Cleanup(func() { cancel(); <-done })
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		code, out, _ := runCLI(t, "tenants", "get", s.TenantID, "--server", w.httpURL, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "succeeded"`) {
			return fmt.Sprintf("tenant %s: %s\ndemo-services: %s", s.TenantID, out, served.String())
		}
		return ""
	})
	code, out, _ = runCLI(t, "audit", "--tenant", s.TenantID, "--raw", "--unredacted", "--nats-url", w.nats, "--nats-nkey", w.nkey)
	if want := `"output":{"amount":250,`; code != 0 || !strings.Contains(out, want) || !strings.Contains(out, `"trackingNumber":"trk-o-100"`) {
		t.Errorf("audit --raw: exit %d, want the output (%s…) in\n%s", code, want, out)
	}
}

// TestWorkflowStartOnStepFunctions starts a Step Functions execution
// through the CLI, with AWS_ENDPOINT_URL pointing at the local AWS server:
// the state machine is created once, the same name and input start nothing
// new, another input is refused.
func TestWorkflowStartOnStepFunctions(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	dir := t.TempDir()
	file := filepath.Join(dir, "order-fulfillment.asl.json")
	asl := `{"StartAt":"Charge","States":{"Charge":{"Type":"Wait","Seconds":60,"End":true}}}`
	if err := os.WriteFile(file, []byte(asl), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(input string, extra ...string) (int, string, string) {
		args := append([]string{"workflow", "start", file, "--provider", "stepfunctions", "--tenant", "acme",
			"--name", "ord-1", "--input", input, "--role-arn", "arn:aws:iam::123456789012:role/substate-sfn"}, extra...)
		return runCLI(t, args...)
	}
	code, out, errOut := start(`{"orderId":"o-1"}`, "--json")
	if code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	var x engine.Execution
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatalf("start --json: %v\n%s", err, out)
	}
	machine := awstest.StateMachineARN("order-fulfillment")
	if want := awstest.ExecutionARN(machine, "ord-1"); x.ID != want || x.Workflow != machine || x.Existing {
		t.Fatalf("execution = %+v, want new %s", x, want)
	}
	if got, _ := srv.Execution(x.ID); !strings.Contains(got.Input, `"tenantId":"acme"`) {
		t.Fatalf("execution input = %s, want the tenant added", got.Input)
	}

	code, out, errOut = start(`{ "orderId": "o-1" }`)
	if code != 0 || !strings.Contains(out, "already started "+x.ID) {
		t.Fatalf("second start: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = start(`{"orderId":"o-2"}`)
	if code != 1 || !strings.Contains(errOut, "exists with a different input") {
		t.Fatalf("other input: exit %d\n%s", code, errOut)
	}
	if srv.Calls("CreateStateMachine") != 1 || srv.Calls("StartExecution") != 1 {
		t.Fatalf("create %d, start %d calls; want one of each", srv.Calls("CreateStateMachine"), srv.Calls("StartExecution"))
	}

	t.Run("ChangedDefinitionUpdated", func(t *testing.T) {
		changed := `{"StartAt":"Charge","States":{"Charge":{"Type":"Wait","Seconds":120,"End":true}}}`
		if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := start(`{"orderId":"o-3"}`, "--name", "ord-3")
		if code != 0 || !strings.Contains(errOut, "the definition changed: updated state machine "+machine) || !strings.Contains(errOut, machine+":1") {
			t.Fatalf("start with a changed definition: exit %d\n%s%s", code, out, errOut)
		}
		if v := srv.Versions(machine); len(v) != 1 || v[0] != changed {
			t.Fatalf("versions %v, want the changed definition published", v)
		}
		code, _, errOut = start(`{"orderId":"o-4"}`, "--name", "ord-4")
		if code != 0 || strings.Contains(errOut, "definition changed") || srv.Calls("UpdateStateMachine") != 1 {
			t.Fatalf("unchanged start: exit %d, %d updates\n%s", code, srv.Calls("UpdateStateMachine"), errOut)
		}
	})
	t.Run("GeneratedName", func(t *testing.T) {
		code, out, errOut := runCLI(t, "workflow", "start", file, "--provider", "stepfunctions", "--tenant", "acme", "--json")
		var x engine.Execution
		if code != 0 || json.Unmarshal([]byte(out), &x) != nil || !strings.HasPrefix(x.Name, "substate-") {
			t.Fatalf("start without --name: exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("ByARN", func(t *testing.T) {
		other := srv.AddStateMachine("existing", asl, "arn:aws:iam::123456789012:role/other")
		srv.ResetCalls()
		code, out, errOut := runCLI(t, "workflow", "start", other, "--provider", "stepfunctions", "--tenant", "acme", "--name", "by-arn", "--json")
		var x engine.Execution
		if code != 0 || json.Unmarshal([]byte(out), &x) != nil || x.ID != awstest.ExecutionARN(other, "by-arn") {
			t.Fatalf("start by ARN: exit %d\n%s%s", code, out, errOut)
		}
		if srv.Calls("CreateStateMachine")+srv.Calls("UpdateStateMachine") != 0 {
			t.Fatal("starting by ARN changed the state machine")
		}
		code, _, errOut = runCLI(t, "workflow", "start", other, "--tenant", "acme")
		if code != 1 || !strings.Contains(errOut, "--provider stepfunctions") {
			t.Fatalf("ARN on the engine: exit %d %s", code, errOut)
		}
	})
	t.Run("ErrInvalidDefinition", func(t *testing.T) {
		bad := filepath.Join(dir, "broken.asl.json")
		if err := os.WriteFile(bad, []byte(`{"StartAt":"Missing","States":{"A":{"Type":"Succeed"}}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		srv.ResetCalls()
		code, _, errOut := runCLI(t, "workflow", "start", bad, "--provider", "stepfunctions", "--tenant", "acme", "--role-arn", "arn:aws:iam::123456789012:role/x")
		if code != 1 || !strings.Contains(errOut, "invalid state machine definition") || srv.TotalCalls() != 0 {
			t.Fatalf("exit %d after %d calls\n%s", code, srv.TotalCalls(), errOut)
		}
	})
	t.Run("ErrNoRole", func(t *testing.T) {
		other := filepath.Join(dir, "other.json")
		if err := os.WriteFile(other, []byte(asl), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "workflow", "start", other, "--provider", "stepfunctions", "--tenant", "acme")
		if code != 1 || !strings.Contains(errOut, "no execution role arn") {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
	})
}
