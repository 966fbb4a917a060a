package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
)

// executionsWorkflow calls a task (no retries) that fails while the test
// keeps its gate closed; the "slow" tenants wait an hour first.
const executionsWorkflow = `
name: gated
version: "1"
startAt: route
states:
  route:
    type: Choice
    choices:
      - condition: {variable: $.slow, booleanEquals: true}
        next: nap
    default: call
  nap: {type: Wait, seconds: 3600, next: call}
  call: {type: Task, resource: gate.pass, next: done}
  done: {type: Success}
`

// tenantIs waits until "tenants get" shows what ok accepts.
func tenantIs(t *testing.T, url, tenant string, ok func(substate.TenantView) bool) substate.TenantView {
	t.Helper()
	var v substate.TenantView
	workertest.Eventually(t, func() string {
		code, out, _ := runCLI(t, "tenants", "get", tenant, "--server", url, "--json")
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !ok(v) {
			return fmt.Sprintf("tenant %s: %s", tenant, out)
		}
		return ""
	})
	return v
}

// TestExecutionsCLI is the operator's story on a running worker: a failed
// tenant is described and retried, goes running then succeeded; a running
// one is stopped with a cause and shows failed/cancelled with it; each
// action is on SUBSTATE_AUDIT, recorded as taken by "loopback".
func TestExecutionsCLI(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	url := w.httpURL
	var open atomic.Bool
	svc, err := micro.AddService(w.bus(t).Conn, micro.Config{Name: "gate", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	err = svc.AddEndpoint("pass", micro.HandlerFunc(func(req micro.Request) {
		if !open.Load() {
			_ = req.Error("Closed", "the gate is closed", nil)
			return
		}
		_ = req.Respond([]byte(`{"passed":true}`))
	}), micro.WithEndpointSubject(substate.TaskSubject("gate", "pass")))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "gated.yaml")
	if err := os.WriteFile(file, []byte(executionsWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct{ name, tenant, input string }{{"fast-1", "t-fast", `{"slow":false}`}, {"slow-1", "t-slow", `{"slow":true}`}} {
		args := append([]string{"workflow", "start", file, "--name", x.name, "--tenant", x.tenant, "--input", x.input}, w.natsArgs()...)
		if code, out, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("workflow start %s: exit %d\n%s%s", x.name, code, out, errOut)
		}
	}

	t.Run("DescribeAndRetryFailed", func(t *testing.T) {
		tenantIs(t, url, "t-fast", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed })
		code, out, errOut := runCLI(t, "tenants", "list", "--sub-state", "failed", "--server", url)
		if code != 0 || !strings.Contains(out, "t-fast") {
			t.Fatalf("list failed: %d %s%s", code, out, errOut)
		}
		code, out, errOut = runCLI(t, "executions", "describe", "t-fast", "--server", url)
		for _, want := range []string{"engine", "fast-1", "call", "the gate is closed", "retryable  yes"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("describe lacks %q: %d\n%s%s", want, code, out, errOut)
			}
		}
		code, out, _ = runCLI(t, "executions", "retry", "t-fast", "--dry-run", "--server", url)
		if code != 0 || !strings.Contains(out, "dry run") {
			t.Fatalf("dry run: %d %s", code, out)
		}
		if v := tenantIs(t, url, "t-fast", func(substate.TenantView) bool { return true }); v.WorkflowSubState != substate.StateFailed {
			t.Fatalf("a dry run changed the view: %+v", v)
		}
		open.Store(true)
		code, out, errOut = runCLI(t, "executions", "retry", "t-fast", "--reason", "gate opened", "--server", url)
		if code != 0 || !strings.Contains(out, "retried engine execution fast-1") {
			t.Fatalf("retry: %d %s%s", code, out, errOut)
		}
		tenantIs(t, url, "t-fast", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
		ev := auditOf(t, w, substate.ActionRetry, "t-fast")
		if ev.Who != "loopback" || ev.Reason != "gate opened" || ev.Outcome != substate.AuditDone || ev.ExecutionID != "fast-1" {
			t.Errorf("audit event %+v", ev)
		}
		// The tenant's timeline holds the retry between its transitions:
		// who, why, how it ended.
		code, out, errOut = runCLI(t, "audit", "--tenant", "t-fast", "--server", url)
		if row := lineWith(out, "retry by loopback"); code != 0 || !strings.Contains(row, "gate opened") || !strings.Contains(row, "operator: done") ||
			strings.Index(out, "failed") > strings.Index(out, "retry by loopback") || strings.LastIndex(out, "succeeded") < strings.Index(out, "retry by loopback") {
			t.Errorf("audit has no retry between the failure and the success: %d\n%s%s", code, out, errOut)
		}
		code, out, _ = runCLI(t, "audit", "--tenant", "t-fast", "--server", url, "-o", "json")
		if code != 0 || !strings.Contains(out, `{"operatorAction":{`) || !strings.Contains(out, `"reason":"gate opened"`) {
			t.Errorf("audit -o json has no operatorAction line:\n%s", out)
		}
		code, _, errOut = runCLI(t, "executions", "retry", "t-fast", "--server", url)
		if code == 0 || !strings.Contains(errOut, "no execution to act on") {
			t.Errorf("retry of a succeeded tenant: %d %s", code, errOut)
		}
		// The succeeded execution is still described, with its output
		// (redacted: the caller has no admin key).
		code, out, errOut = runCLI(t, "executions", "describe", "t-fast", "--server", url)
		for _, want := range []string{"fast-1", "succeeded", `output     "[redacted]"`, "retryable  no: the execution succeeded"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("describe of the succeeded execution lacks %q: %d\n%s%s", want, code, out, errOut)
			}
		}
	})
	t.Run("StopRunning", func(t *testing.T) {
		tenantIs(t, url, "t-slow", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateWaiting })
		// Held to an execution the tenant no longer runs, the stop is
		// skipped: exit 1, the execution left running, the skip recorded.
		code, out, errOut := runCLI(t, "executions", "stop", "t-slow", "--execution-id", "slow-0", "--reason", "old plan", "--server", url)
		if code != 1 || !strings.Contains(out, "skipped") || !strings.Contains(out, "slow-1") {
			t.Fatalf("stop held to another execution: %d %s%s", code, out, errOut)
		}
		if v := tenantIs(t, url, "t-slow", func(substate.TenantView) bool { return true }); v.WorkflowSubState != substate.StateWaiting {
			t.Fatalf("a skipped stop changed the tenant: %+v", v)
		}
		if ev := auditOf(t, w, substate.ActionStop, "t-slow"); ev.Outcome != substate.AuditSkipped || ev.Reason != "old plan" {
			t.Errorf("audit of the skipped stop %+v", ev)
		}
		code, out, errOut = runCLI(t, "executions", "stop", "t-slow", "--execution-id", "slow-1", "--reason", "customer left", "--server", url)
		if code != 0 || !strings.Contains(out, "stopped engine execution slow-1") {
			t.Fatalf("stop: %d %s%s", code, out, errOut)
		}
		v := tenantIs(t, url, "t-slow", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed })
		if v.WorkflowVerb != substate.VerbCancelled || !strings.Contains(v.WorkflowErrorMessage, "customer left") {
			t.Fatalf("stopped view %+v", v)
		}
		if ev := auditOf(t, w, substate.ActionStop, "t-slow"); ev.Reason != "customer left" || ev.Who != "loopback" {
			t.Errorf("audit event %+v", ev)
		}
		code, _, errOut = runCLI(t, "executions", "stop", "t-slow", "--server", url)
		if code == 0 || !strings.Contains(errOut, "already ended") {
			t.Errorf("second stop: %d %s", code, errOut)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		code, _, errOut := runCLI(t, "executions", "describe", "nobody", "--server", url)
		if code == 0 || !strings.Contains(errOut, "not found") {
			t.Errorf("unknown tenant: %d %s", code, errOut)
		}
	})
}

// auditOf returns the newest audit event of an action on a tenant.
func auditOf(t *testing.T, w *process, action substate.ExecutionAction, tenant string) substate.AuditEvent {
	t.Helper()
	ctx := context.Background()
	s, err := w.bus(t).JetStream.Stream(ctx, substate.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, substate.AuditSubject(action, tenant))
	if err != nil {
		t.Fatalf("audit of %s %s: %v", action, tenant, err)
	}
	var ev substate.AuditEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// lineWith returns the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// TestExecutionsStopPendingOnRestate stops a backing-off invocation on a
// real Restate server: Restate takes the cancel but delivers it only when
// the handler next runs, a minute away, so the command prints pending with
// what substate does next (naming --kill) and exits ExitPending, and the
// audit says pending, not done. The kill then stops it (exit 0), and a dry
// run of another stop says it would be refused.
func TestExecutionsStopPendingOnRestate(t *testing.T) {
	rs := restatetest.Start(t)
	w := startWorkerProcess(t, t.TempDir(), "--restate-admin-url", rs.AdminURL, "--restate-services", "Provision", "--restate-poll-interval", "1s")
	url := w.httpURL
	// backoff retries after 50 ms, then a minute later: after its second
	// failure it waits far longer than the stop's 10 s of reading back.
	id := rs.Send(t, "Provision", "t-backoff", "backoff", nil, 0)
	rs.WaitRow(t, id, "backing off after two attempts", func(row map[string]any) bool {
		n, _ := row["retry_count"].(float64)
		return row["status"] == "backing-off" && n >= 2
	})
	tenantIs(t, url, "t-backoff", func(v substate.TenantView) bool {
		return v.WorkflowExecutionID == id && v.WorkflowSubState == substate.StateBackingOff
	})

	code, out, errOut := runCLIFor(t, time.Minute, "executions", "stop", "t-backoff", "--reason", "customer left", "--server", url)
	if code != ExitPending || !strings.Contains(out, "stop of restate execution "+id+" is pending, not yet effective (tenant t-backoff") ||
		!strings.Contains(out, "substate keeps checking") || !strings.Contains(out, "`substate executions stop --kill` ends it at once") {
		t.Fatalf("stop of a backing-off invocation: exit %d, want %d with pending and what substate does next\n%s%s", code, ExitPending, out, errOut)
	}
	if strings.Contains(out, "stopped restate") {
		t.Fatalf("a pending stop printed as done:\n%s", out)
	}
	if ev := auditOf(t, w, substate.ActionStop, "t-backoff"); ev.Outcome != substate.AuditPending || ev.Reason != "customer left" {
		t.Fatalf("audit of the pending stop %+v, want outcome pending", ev)
	}

	code, out, errOut = runCLIFor(t, time.Minute, "executions", "stop", "t-backoff", "--kill", "--reason", "customer left", "--server", url)
	if code != 0 || !strings.Contains(out, "stopped restate execution "+id) {
		t.Fatalf("kill: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "executions", "stop", "t-backoff", "--kill", "--dry-run", "--server", url)
	if code != 1 || !strings.Contains(errOut, "dry run: stop of tenant t-backoff would be refused") || strings.Contains(out+errOut, "passes") {
		t.Fatalf("dry run of a stop of a killed invocation: exit %d, want 1 and would be refused\n%s%s", code, out, errOut)
	}
}
