package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// retryingWorkflow charges a card and retries a failure in an hour: an
// execution whose task fails is backing-off when the test looks.
const retryingWorkflow = `
name: retrying
version: "1"
startAt: charge
states:
  charge:
    type: Task
    resource: billing.charge
    next: done
    retry:
      maxAttempts: 3
      initialDelaySeconds: 3600
  done: {type: Success}
`

// TestConsoleStuckAndTenantActions: tenants past their SLO are counted by
// the stuck chip, which filters the table to them, and a stuck tenant's
// page says since when; a Restate tenant links to the Restate UI
// (--restate-ui-url) and, its row having no next_retry_at, says its next
// retry is not reported by Restate; an engine execution backing off shows
// when it retries next; a failed tenant's page retries its
// execution (a dry run first, then with a reason), and the retry and its
// outcome appear in the tenant's timeline, with a link to the execution
// in the AWS console.
func TestConsoleStuckAndTenantActions(t *testing.T) {
	aws := awstest.New(t)
	awstest.Env(t, aws.URL, "us-east-1")
	machine := aws.AddStateMachine("provision", `{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`, "arn:aws:iam::123456789012:role/sfn")
	slos := writeSLOs(t, "workflows:\n  \"*\": {run: 2s}\n")
	dataDir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dataDir), func(f *worker.Flags) {
		f.SLOFile, f.RestateUIURL = slos, "http://restate.example:9070/ui/invocations/{invocationId}"
	})
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour)}
	cw.postRestate(t, "rs-1", "backing-off", time.Now(), 2, "database unreachable")
	now := time.Now().UTC()
	slowARN := awstest.ExecutionARN(machine, "run-slow-1")
	aws.AddExecution(awstest.Execution{ARN: slowARN, StateMachineARN: machine, Name: "run-slow-1", Status: "RUNNING",
		Input: `{"tenantId":"slow-1"}`, StartDate: now})
	aws.AddExecution(awstest.Execution{ARN: awstest.ExecutionARN(machine, "run-pay-1"), StateMachineARN: machine, Name: "run-pay-1",
		Status: "FAILED", Input: `{"tenantId":"pay-1"}`, StartDate: now.Add(-time.Minute), StopDate: now, Error: "ProvisioningFailed", Cause: "card declined"})
	body, _ := json.Marshal([]json.RawMessage{fleetRunning(machine, "run-slow-1", "slow-1", now), fleetEvent(machine, "run-pay-1", "pay-1", "card declined", now)})
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	cw.tenantIs(t, "pay-1", substate.StateFailed)
	// Past the run SLO: the running Step Functions execution and the
	// Restate invocation backing off.
	for _, id := range []string{"slow-1", "rs-1"} {
		workertest.Eventually(t, func() string {
			var v substate.TenantView
			if code := workertest.GetJSON(t, cw.url+"/v1/tenants/"+id, &v); code != 200 || !v.Stuck {
				return fmt.Sprintf("%s: %d %+v, want stuck", id, code, v)
			}
			return ""
		})
	}

	ctx := newBrowser(t)
	run(t, ctx, "open the console", chromedp.Navigate(cw.url+"/"))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#stuck-chip .n') && document.querySelector('#stuck-chip .n').textContent === '2'`)
	eval(t, ctx, `document.getElementById('stuck-chip').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `location.hash.includes('stuck=true') && document.getElementById('f-stuck').checked`)
	waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#tenants tbody tr').length === 2 && `+rowSel("slow-1")+` && `+rowSel("rs-1"))

	run(t, ctx, "open the stuck tenant", chromedp.Navigate(cw.url+"/#/tenant/slow-1"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('stuck-since') && document.getElementById('stuck-since').textContent.startsWith('stuck since')`)
	var href string
	eval(t, ctx, `document.getElementById('provider-link').href`, &href)
	if want := "https://us-east-1.console.aws.amazon.com/states/home?region=us-east-1#/v2/executions/details/" + strings.ReplaceAll(slowARN, ":", "%3A"); href != want {
		t.Errorf("the AWS console link is %s, want %s", href, want)
	}

	// A Restate tenant links to its invocation in the Restate UI; its row
	// has no next_retry_at, and the page says Restate did not report one.
	cw.tenantIs(t, "rs-1", substate.StateBackingOff)
	run(t, ctx, "open the Restate tenant", chromedp.Navigate(cw.url+"/#/tenant/rs-1"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('provider-link') && document.getElementById('next-retry')`)
	eval(t, ctx, `document.getElementById('provider-link').href`, &href)
	if want := "http://restate.example:9070/ui/invocations/inv_1"; href != want {
		t.Errorf("the Restate UI link is %s, want %s", href, want)
	}
	var said string
	eval(t, ctx, `document.getElementById('next-retry').textContent`, &said)
	if said != "not reported by Restate" {
		t.Errorf("the Restate tenant's next retry says %q, want %q", said, "not reported by Restate")
	}

	// An engine execution whose task failed waits an hour for its retry:
	// the page shows when, as the engine scheduled it.
	engineBackingOff(t, w, dataDir, "eng-1")
	var v substate.TenantView
	workertest.Eventually(t, func() string {
		if code := workertest.GetJSON(t, cw.url+"/v1/tenants/eng-1", &v); code != 200 || v.WorkflowSubState != substate.StateBackingOff || v.WorkflowNextRetryAt.IsZero() {
			return fmt.Sprintf("eng-1: %d %+v, want backing-off with a next retry", code, v)
		}
		return ""
	})
	if d := time.Until(v.WorkflowNextRetryAt); d < 50*time.Minute || d > 3*time.Hour {
		t.Errorf("the engine retries at %v, %v from now; want in about an hour", v.WorkflowNextRetryAt, d)
	}
	run(t, ctx, "open the engine tenant", chromedp.Navigate(cw.url+"/#/tenant/eng-1"))
	waitJS(t, ctx, 10*time.Second, `document.querySelector('#next-retry time')`)
	var shown struct {
		At, Datetime, Text string
	}
	eval(t, ctx, `(() => { const n = document.getElementById('next-retry'); return {at: n.dataset.at, datetime: n.querySelector('time').getAttribute('datetime'), text: n.textContent}; })()`, &shown)
	if want := v.WorkflowNextRetryAt.UTC().Format(time.RFC3339Nano); shown.Datetime != want || shown.At != want {
		t.Errorf("the engine tenant's next retry shows %+v, want the time %s", shown, want)
	}
	if !strings.HasPrefix(shown.Text, "in ") {
		t.Errorf("the engine tenant's next retry reads %q, want a time to come (in …)", shown.Text)
	}

	run(t, ctx, "open the failed tenant", chromedp.Navigate(cw.url+"/#/tenant/pay-1"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('act-retry')`)
	eval(t, ctx, `document.getElementById('act-retry').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `document.getElementById('act-confirm')`)
	if x, _ := aws.Execution(awstest.ExecutionARN(machine, "run-pay-1")); x.RedriveCount != 0 {
		t.Fatal("the preview redrove the execution")
	}
	eval(t, ctx, `document.getElementById('act-reason').value = 'card updated'; document.getElementById('act-confirm').click(); true`, nil)
	waitJS(t, ctx, 20*time.Second, `document.querySelector('#act-result p') && document.querySelector('#act-result p').dataset.outcome === 'done'`)
	if x, _ := aws.Execution(awstest.ExecutionARN(machine, "run-pay-1")); x.RedriveCount != 1 {
		t.Fatalf("the execution was redriven %d times, want once", x.RedriveCount)
	}
	waitJS(t, ctx, 20*time.Second, `document.querySelector('#timeline tr.operator[data-outcome=done]')`)
	var row string
	eval(t, ctx, `document.querySelector('#timeline tr.operator').textContent`, &row)
	if !strings.Contains(row, "retry by loopback — card updated") {
		t.Errorf("the timeline's operator row says %q", row)
	}
	// The page reloaded for the change the retry made (the timeline shows
	// it): the outcome the operator was told is still there to read.
	var kept string
	eval(t, ctx, `(() => { const p = document.querySelector('#act-result p'); return p ? p.dataset.outcome : ''; })()`, &kept)
	if kept != "done" {
		t.Errorf("after the page reloaded for the retry's change the action's outcome reads %q, want done still shown", kept)
	}

	// A stop previewed on run-pay-1 and confirmed after pay-1 moved on to
	// a new execution is skipped: the confirmation carries the execution
	// the operator saw, and nothing reaches the new one.
	run(t, ctx, "open the tenant again", chromedp.Navigate(cw.url+"/#/tenant/pay-1"))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('act-stop')`)
	eval(t, ctx, `document.getElementById('act-stop').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `document.getElementById('act-confirm')`)
	next := awstest.ExecutionARN(machine, "run-pay-2")
	aws.AddExecution(awstest.Execution{ARN: next, StateMachineARN: machine, Name: "run-pay-2", Status: "RUNNING",
		Input: `{"tenantId":"pay-1"}`, StartDate: time.Now().UTC()})
	body = fleetRunning(machine, "run-pay-2", "pay-1", time.Now().UTC().Add(time.Minute))
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest run-pay-2: %d", code)
	}
	workertest.WaitView(t, cw.url, "pay-1", func(v substate.TenantView) bool { return v.WorkflowExecutionID == next })
	eval(t, ctx, `document.getElementById('act-reason').value = 'wrong plan'; document.getElementById('act-confirm').click(); true`, nil)
	waitJS(t, ctx, 20*time.Second, `document.querySelector('#act-result p') && document.querySelector('#act-result p').dataset.outcome`)
	var outcome, said2 string
	eval(t, ctx, `document.querySelector('#act-result p').dataset.outcome`, &outcome)
	eval(t, ctx, `document.querySelector('#act-result p').textContent`, &said2)
	if outcome != substate.AuditSkipped || !strings.Contains(said2, "run-pay-2") {
		t.Errorf("the stop confirmed after the tenant moved on: %q (%s), want skipped naming the new execution", outcome, said2)
	}
	for _, name := range []string{"run-pay-1", "run-pay-2"} {
		if x, _ := aws.Execution(awstest.ExecutionARN(machine, name)); x.Status == "ABORTED" {
			t.Errorf("%s was stopped by a confirmation of another execution", name)
		}
	}
}

// engineBackingOff starts an engine execution of retryingWorkflow for
// tenant whose task service answers every attempt with an error, so that
// it backs off for an hour.
func engineBackingOff(t *testing.T, w *workertest.Worker, dataDir, tenant string) {
	t.Helper()
	ctx := context.Background()
	opts, err := (bus.Credentials{Dir: worker.NATSCredentialsDir(dataDir)}).Options(bus.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(w.Bus.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	svc, err := micro.AddService(nc, micro.Config{Name: "billing", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("charge", micro.HandlerFunc(func(req micro.Request) { _ = req.Error("CardDeclined", "card declined", nil) }),
		micro.WithEndpointSubject(substate.TaskSubject("billing", "charge")))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ref, err := w.Engine.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte(retryingWorkflow)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Engine.Start(ctx, engine.StartRequest{Workflow: ref, Name: tenant + "-run", TenantID: tenant, Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
}
