package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestConsoleFleetRetry is the incident as an operator runs it from the
// console: the group panel shows the failing fingerprint (and the workflow
// type, a link too), a click filters the table by it, "Retry all N matching" previews the job (the dry run:
// per provider, the calls and the time), the operator confirms with a
// reason, the page follows the job's progress live and shows its report.
// Step Functions is awstest: every failed execution is redriven once, and
// tenants of another error are left alone.
func TestConsoleFleetRetry(t *testing.T) {
	const n, others = 12, 3
	aws := awstest.New(t)
	awstest.Env(t, aws.URL, "us-east-1")
	machine := aws.AddStateMachine("provision", `{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`, "arn:aws:iam::123456789012:role/sfn")
	w := workertest.Start(t)
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL()}
	now := time.Now().UTC()
	var batch []json.RawMessage
	for i := range n + others {
		tenant, cause := fmt.Sprintf("pay-%03d", i), "payment provider returned HTTP 503"
		if i >= n {
			tenant, cause = fmt.Sprintf("quota-%03d", i), "quota exceeded"
		}
		name := "run-" + tenant
		aws.AddExecution(awstest.Execution{ARN: awstest.ExecutionARN(machine, name), StateMachineARN: machine, Name: name,
			Status: "FAILED", Input: `{"tenantId":"` + tenant + `"}`, StartDate: now.Add(-time.Minute), StopDate: now,
			Error: "ProvisioningFailed", Cause: cause})
		ev := fleetEvent(machine, name, tenant, cause, now)
		batch = append(batch, ev)
	}
	body, _ := json.Marshal(batch)
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	for i := range n + others {
		tenant := fmt.Sprintf("pay-%03d", i)
		if i >= n {
			tenant = fmt.Sprintf("quota-%03d", i)
		}
		cw.tenantIs(t, tenant, substate.StateFailed)
	}

	ctx := newBrowser(t)
	run(t, ctx, "open the console", chromedp.Navigate(cw.url+"/"))
	// Every group is a link: the workflow type's filters the table (and
	// shows as a chip), and ✕ takes the filter off again.
	wt := `document.querySelector('#groups-workflowType li[data-value="provision"] a')`
	waitJS(t, ctx, 10*time.Second, wt+` && document.querySelector('#groups-workflowType li[data-value="provision"] .n').textContent === '`+strconv.Itoa(n+others)+`'`)
	eval(t, ctx, wt+`.click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `location.hash.includes('workflowType=provision') && document.querySelector('.filter-chip[data-k="workflowType"]') &&
		document.getElementById('match-total') && document.getElementById('match-total').dataset.total === '`+strconv.Itoa(n+others)+`'`)
	waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#tenants tbody tr').length === `+strconv.Itoa(n+others))
	eval(t, ctx, `document.querySelector('.filter-chip[data-k="workflowType"] .remove').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `!location.hash.includes('workflowType=') && !document.querySelector('.filter-chip')`)
	top := `document.querySelector('#groups-fingerprint li[data-value] a')`
	waitJS(t, ctx, 10*time.Second, top+` && document.querySelector('#groups-fingerprint li[data-value] .n').textContent === '`+strconv.Itoa(n)+`'`)
	eval(t, ctx, top+`.click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `location.hash.includes('fingerprint=') && document.getElementById('match-total') && document.getElementById('match-total').dataset.total === '`+strconv.Itoa(n)+`'`)
	waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#tenants tbody tr').length === `+strconv.Itoa(n))

	eval(t, ctx, `document.querySelector('button.fleet-retry').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `document.getElementById('fleet-preview') && document.getElementById('fleet-preview').dataset.total === '`+strconv.Itoa(n)+`'`)
	var lane struct{ Lane, Act, Refuse string }
	eval(t, ctx, `(() => { const r = document.querySelector('#fleet-lanes tbody tr'); return {Lane: r.dataset.lane, Act: r.querySelector('.act').textContent, Refuse: r.querySelector('.refuse').textContent} })()`, &lane)
	if lane.Lane != "stepfunctions" || lane.Act != strconv.Itoa(n) || lane.Refuse != "0" {
		t.Fatalf("the preview's lane %+v, want stepfunctions acting on %d", lane, n)
	}
	// The dry run's permission probes are calls that change nothing (a
	// redrive of an execution that does not exist); what the job asks is
	// counted from here.
	probes := aws.Calls("RedriveExecution")
	for i := range n + others {
		if x, _ := aws.Execution(awstest.ExecutionARN(machine, fmt.Sprintf("run-pay-%03d", i))); i < n && x.RedriveCount != 0 {
			t.Fatalf("the preview redrove %s", x.Name)
		}
	}
	if dir := os.Getenv("SUBSTATE_CONSOLE_SCREENSHOT_DIR"); dir != "" {
		screenshot(t, ctx, dir, "console-fleet-preview.png", "")
	}

	eval(t, ctx, `document.getElementById('fleet-reason').value = 'payment provider back'; document.getElementById('fleet-confirm').click(); true`, nil)
	waitJS(t, ctx, 10*time.Second, `location.hash.startsWith('#/actions/') && document.getElementById('job-progress')`)
	waitJS(t, ctx, 60*time.Second, `document.getElementById('job-progress').dataset.state === 'done' && document.getElementById('job-report').dataset.loaded`)
	var got struct {
		Done    string
		Members int
		AllDone bool
	}
	eval(t, ctx, `({Done: document.getElementById('job-done').textContent, Members: document.querySelectorAll('#job-members tbody tr').length,
		AllDone: [...document.querySelectorAll('#job-members tbody tr')].every((r) => r.dataset.outcome === 'done')})`, &got)
	if got.Done != strconv.Itoa(n) || got.Members != n || !got.AllDone {
		t.Fatalf("the job's page: %+v, want %d members done", got, n)
	}
	if calls := aws.Calls("RedriveExecution") - probes; calls != n {
		t.Errorf("%d redrives, want one per tenant of the group (%d)", calls, n)
	}
	if dir := os.Getenv("SUBSTATE_CONSOLE_SCREENSHOT_DIR"); dir != "" {
		screenshot(t, ctx, dir, "console-fleet-done.png", "")
	}
}

// fleetEvent is the EventBridge event of a failed execution of machine.
func fleetEvent(machine, name, tenant, cause string, at time.Time) json.RawMessage {
	arn := awstest.ExecutionARN(machine, name)
	c, _ := json.Marshal(map[string]string{"errorMessage": cause, "errorType": "ProvisioningFailed"})
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": "ev-" + name, "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": awstest.AccountID, "time": at.Format(time.RFC3339), "region": "us-east-1", "resources": []string{arn},
		"detail": map[string]any{"executionArn": arn, "stateMachineArn": machine, "name": name, "status": "FAILED",
			"startDate": at.Add(-time.Minute).UnixMilli(), "stopDate": at.UnixMilli(), "input": `{"tenantId":"` + tenant + `"}`,
			"error": "ProvisioningFailed", "cause": string(c), "redriveCount": 0},
	})
	return b
}

// fleetRunning is fleetEvent's execution still running: no stop, error
// or cause yet.
func fleetRunning(machine, name, tenant string, at time.Time) json.RawMessage {
	var ev map[string]any
	_ = json.Unmarshal(fleetEvent(machine, name, tenant, "", at), &ev)
	d := ev["detail"].(map[string]any)
	d["status"], d["error"], d["cause"], d["stopDate"] = "RUNNING", nil, nil, nil
	b, _ := json.Marshal(ev)
	return b
}
