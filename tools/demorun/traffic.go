package demorun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/ingress"
)

// providerStep is one status event the demo posts through the HTTP ingress,
// as a provider would, and the sub-state its tenant settles in.
type providerStep struct {
	tenant string
	path   string // ingest route
	body   []byte
	id     string // webhook-id of a Restate delivery
}

// providerStory is a tenant whose workflow runs on another provider.
type providerStory struct {
	tenant, provider, want, story string
	steps                         []providerStep
}

// providerStories builds the Step Functions and Restate tenants of the demo:
// a redriven execution that fails then succeeds, an invocation that waits,
// backs off and succeeds, and one that waits and is killed. Execution and
// event ids carry the run's start, so a second demo on the same data is new
// traffic rather than duplicates that JetStream drops.
func providerStories(start time.Time) []providerStory {
	run := start.UTC().Format("20060102T150405")
	arn := "arn:aws:states:us-east-1:123456789012:execution:provision-tenant:hooli-" + run
	stark, wayne := "inv_stark_"+run, "inv_wayne_"+run
	return []providerStory{
		{"hooli", "stepfunctions", "succeeded", "Step Functions: fails, is redriven, succeeds", []providerStep{
			sfnStep("hooli", arn, "RUNNING", 0, start, nil, ""),
			sfnStep("hooli", arn, "FAILED", 0, start, "States.TaskFailed", `{"errorMessage":"quota exceeded in us-east-1","errorType":"QuotaExceeded"}`),
			sfnStep("hooli", arn, "RUNNING", 1, start, nil, ""),
			sfnStep("hooli", arn, "SUCCEEDED", 1, start, nil, ""),
		}},
		{"stark", "restate", "succeeded", "Restate: sleeps (suspended), backs off twice, then completes", []providerStep{
			restateStep("stark", stark, "running", start, 1, 1, "", "", ""),
			restateStep("stark", stark, "suspended", start, 2, 1, "", "", ""),
			restateStep("stark", stark, "running", start, 3, 1, "", "", ""),
			restateStep("stark", stark, "backing-off", start, 4, 2, "[503] dns provider unavailable", "", ""),
			restateStep("stark", stark, "running", start, 5, 3, "", "", ""),
			restateStep("stark", stark, "completed", start, 6, 3, "", "success", ""),
		}},
		{"wayne", "restate", "failed", "Restate: waits for an approval (suspended), is killed by an operator", []providerStep{
			restateStep("wayne", wayne, "running", start, 1, 1, "", "", ""),
			restateStep("wayne", wayne, "suspended", start, 2, 1, "", "", ""),
			restateStep("wayne", wayne, "completed", start, 3, 1, "", "failure", "[409] killed"),
		}},
	}
}

// sfnStep is an EventBridge "Step Functions Execution Status Change" event.
func sfnStep(tenant, arn, status string, redrive int, start time.Time, errName any, cause string) providerStep {
	seq := time.Duration(redrive*2+len(status)) * time.Second
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	detail := map[string]any{
		"executionArn": arn, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:provision-tenant",
		"name": name, "status": status, "startDate": start.UnixMilli(), "redriveCount": redrive,
		"input": `{"tenantId":"` + tenant + `"}`, "inputDetails": map[string]bool{"included": true},
	}
	if status != "RUNNING" {
		detail["stopDate"] = start.Add(seq).UnixMilli()
	}
	if redrive > 0 { // when the redrive's RUNNING happened, as Step Functions reports it
		detail["redriveDate"] = start.Add(time.Duration(redrive*2+len("RUNNING")) * time.Second).UnixMilli()
	}
	if errName != nil {
		detail["error"], detail["cause"] = errName, cause
	}
	id := fmt.Sprintf("demo-%s-%s-%d", name, status, redrive)
	body, _ := json.Marshal(map[string]any{
		"version": "0", "id": id, "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": "123456789012", "time": start.Add(seq).UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []string{arn}, "detail": detail,
	})
	return providerStep{tenant: tenant, path: "/v1/ingest/eventbridge", body: body}
}

// restateStep is a sys_invocation row as a Restate handler would post it,
// modified step seconds after start, on attempt number attempt.
func restateStep(tenant, inv, status string, start time.Time, step, attempt int, lastFailure, result, failure string) providerStep {
	modified := start.Add(time.Duration(step) * time.Second)
	row := map[string]any{
		"id": inv, "target": "Provisioner/" + tenant + "/run", "target_service_name": "Provisioner",
		"target_service_key": tenant, "status": status, "created_at": start.Format(time.RFC3339Nano),
		"modified_at": modified.Format(time.RFC3339Nano), "retry_count": attempt,
	}
	if lastFailure != "" {
		row["last_failure"] = lastFailure
	}
	if result != "" {
		row["completion_result"], row["completed_at"] = result, modified.Format(time.RFC3339Nano)
	}
	if failure != "" {
		row["completion_failure"] = failure
	}
	body, _ := json.Marshal(row)
	id := "demo-" + inv + "-" + strconv.Itoa(step) + "-" + status
	return providerStep{tenant: tenant, path: "/v1/ingest/restate", body: body, id: id}
}

// post delivers one step through the worker's HTTP ingress, with the
// credentials the worker was started with.
func (d *demoRun) post(ctx context.Context, s providerStep) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.w.HTTP.URL()+s.path, bytes.NewReader(s.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if k := d.w.Flags.IngestAPIKey; k != "" {
		req.Header.Set(substate.HeaderAPIKey, k)
	}
	if s.id != "" {
		req.Header.Set(substate.HeaderWebhookID, s.id)
		if err := d.sign(req, s); err != nil {
			return err
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return substate.Errorf(substate.EINTERNAL, "ingest %s answered %d", s.path, resp.StatusCode)
	}
	return nil
}

// sign adds a Standard Webhooks signature when the worker checks them.
func (d *demoRun) sign(req *http.Request, s providerStep) error {
	secret := d.w.Flags.RestateWebhookSecret
	if secret == "" {
		return nil
	}
	now := time.Now()
	sig, err := ingress.SignWebhook(secret, s.id, now, s.body)
	if err != nil {
		return err
	}
	req.Header.Set(substate.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(substate.HeaderWebhookSignature, sig)
	return nil
}
