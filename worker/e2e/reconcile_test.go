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
