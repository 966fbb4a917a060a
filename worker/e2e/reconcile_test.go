package e2e_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// webhookSecret signs the test's Restate deliveries.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signedHeaders returns the Standard Webhooks headers of a delivery.
func signedHeaders(t *testing.T, id string, body []byte) map[string]string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	return map[string]string{"webhook-id": id, "webhook-timestamp": ts,
		"webhook-signature": "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

// runningEvent returns the example EventBridge event as it was while the
// execution ran, and the execution's ARN and input.
func runningEvent(t *testing.T) (body []byte, arn, input string) {
	t.Helper()
	b, err := os.ReadFile(workertest.ExamplePath(t, "stepfunctions-failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	d := ev["detail"].(map[string]any)
	d["status"], d["stopDate"], d["error"], d["cause"] = "RUNNING", nil, nil, nil
	ev["id"] = "running-event"
	body, err = json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return body, d["executionArn"].(string), d["input"].(string)
}

// TestRunReconcilesLostSucceeded is the new user's check: with
// AWS_ENDPOINT_URL pointing at a local Step Functions, a tenant whose
// SUCCEEDED event never arrived is shown succeeded after
// --reconcile-after and one poll, and the calls are counted.
func TestRunReconcilesLostSucceeded(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	body, arn, input := runningEvent(t)
	machine := awstest.StateMachineARN("order-fulfillment")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-2024-000124", Status: "RUNNING",
		Input: input, StartDate: time.UnixMilli(1718791241502).UTC()})

	w := workertest.Start(t, func(f *worker.Flags) {
		f.ReconcileAfter, f.ReconcileInterval = time.Second, 50*time.Millisecond
		f.RestateAdminURL, f.RestatePollEvery = "http://"+workertest.FreeAddr(t), 50*time.Millisecond // nothing listens there
		f.RestateWebhookSecret = webhookSecret
	})
	url := w.HTTP.URL()
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	// A Restate invocation is tracked too; its admin API is away.
	restate := fixtures.Provider("restate-invocation-running.json")
	if code := workertest.Post(t, url+"/v1/ingest/restate", restate, signedHeaders(t, "msg_1", restate)); code != http.StatusAccepted {
		t.Fatalf("restate ingest: %d", code)
	}
	// The execution succeeds and its event is lost.
	if err := srv.SetStatus(arn, "SUCCEEDED", "", ""); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, url+"/v1/tenants/acme", &v); code != http.StatusOK || v.WorkflowSubState != substate.StateSucceeded {
			return fmt.Sprintf("acme: %d %+v", code, v)
		}
		return ""
	})
	workertest.Eventually(t, func() string {
		_, metrics := workertest.Get(t, url+"/metrics")
		for _, want := range []string{
			`substate_provider_api_calls_total{operation="DescribeExecution",provider="stepfunctions"}`,
			`substate_reconcile_polls_total{outcome="ok",provider="stepfunctions"}`,
			`substate_reconcile_polls_total{outcome="unavailable",provider="restate"}`,
		} {
			if !strings.Contains(metrics, want) {
				return "/metrics has no " + want
			}
		}
		return ""
	})
	if _, got := workertest.Get(t, url+"/readyz"); !strings.Contains(got, `"ready"`) {
		t.Errorf("/readyz = %q while the restate admin api is away; the worker should stay ready", got)
	}
}

// TestRunStepFunctionsTruth is the operator's check on Step Functions: a
// dry run of a kill is refused as the kill itself would be (Step
// Functions has no kill), and a tenant first heard of through its FAILED
// event shows the retries and the step its history holds, which the
// worker reads once after the failure.
func TestRunStepFunctionsTruth(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	running, arn, input := runningEvent(t)
	machine := awstest.StateMachineARN("order-fulfillment")
	var page struct{ Events []json.RawMessage }
	if err := json.Unmarshal(fixtures.Provider("sfn-history-retry.json"), &page); err != nil {
		t.Fatal(err)
	}
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-2024-000124", Status: "RUNNING",
		Input: input, StartDate: time.UnixMilli(1718791241502).UTC(), History: page.Events[:6]})
	w := workertest.Start(t, func(f *worker.Flags) { f.ReconcileAfter, f.ReconcileInterval = time.Hour, 50*time.Millisecond })
	url := w.HTTP.URL()
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", running, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, url+"/v1/tenants/acme", &v); code != http.StatusOK || v.WorkflowSubState != substate.StateRunning {
			return fmt.Sprintf("acme: %d %+v", code, v)
		}
		return ""
	})

	t.Run("DryRunKillRefused", func(t *testing.T) {
		for _, dry := range []bool{true, false} {
			body := []byte(fmt.Sprintf(`{"kill":true,"dryRun":%v,"reason":"stuck"}`, dry))
			code := workertest.Post(t, url+"/v1/tenants/acme/execution/stop", body, map[string]string{"Content-Type": "application/json"})
			if code != http.StatusBadRequest {
				t.Errorf("stop --kill (dry run %v): HTTP %d, want 400 as Step Functions refuses a kill", dry, code)
			}
		}
		if x, _ := srv.Execution(arn); x.Status != "RUNNING" || srv.Calls("StopExecution") != 0 {
			t.Fatalf("a refused kill reached Step Functions: %s, %d StopExecution calls", x.Status, srv.Calls("StopExecution"))
		}
	})
	t.Run("FailedEventIsRead", func(t *testing.T) {
		// The execution fails with the rest of its history; only the event
		// says so (the reconciler polls nothing heard of within the hour).
		if err := srv.SetHistory(arn, page.Events); err != nil {
			t.Fatal(err)
		}
		if err := srv.UpdateExecution(arn, func(x *awstest.Execution) {
			x.Status, x.StopDate, x.Error = "FAILED", time.UnixMilli(1718791262338).UTC(), "UpstreamUnavailable"
		}); err != nil {
			t.Fatal(err)
		}
		if code := workertest.PostFile(t, url+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-failed.json"), nil); code != http.StatusAccepted {
			t.Fatalf("ingest: %d", code)
		}
		workertest.Eventually(t, func() string {
			var v substate.TenantView
			if code := workertest.GetJSON(t, url+"/v1/tenants/acme", &v); code != http.StatusOK ||
				v.WorkflowSubState != substate.StateFailed || v.WorkflowRetryCount != 2 || v.WorkflowStep == "" {
				return fmt.Sprintf("acme: %d %+v; want failed with the history's 2 retries and its step", code, v)
			}
			return ""
		})
	})
}
