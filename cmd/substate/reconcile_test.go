package main

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

	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/testkit/awstest"
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

// awsEnv points the standard AWS configuration at srv, with test
// credentials and no shared files or instance metadata.
func awsEnv(t *testing.T, endpoint, region string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION":                  region,
		"AWS_DEFAULT_REGION":          "",
		"AWS_PROFILE":                 "",
		"AWS_ACCESS_KEY_ID":           "AKIDTEST",
		"AWS_SECRET_ACCESS_KEY":       "secret",
		"AWS_SESSION_TOKEN":           "",
		"AWS_ENDPOINT_URL":            endpoint,
		"AWS_CONFIG_FILE":             dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}

// runningEvent returns the example EventBridge event as it was while the
// execution ran, and the execution's ARN and input.
func runningEvent(t *testing.T) (body []byte, arn, input string) {
	t.Helper()
	b, err := os.ReadFile(examplePath("stepfunctions-failed.json"))
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
	awsEnv(t, srv.URL, awstest.Region)
	body, arn, input := runningEvent(t)
	machine := awstest.StateMachineARN("order-fulfillment")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-2024-000124", Status: "RUNNING",
		Input: input, StartDate: time.UnixMilli(1718791241502).UTC()})

	w := startWorker(t, t.TempDir(), "--reconcile-after", "1s", "--reconcile-interval", "50ms",
		"--restate-admin-url", "http://"+freePort(t), "--restate-poll-interval", "50ms", // nothing listens there
		"--restate-webhook-secret", webhookSecret)
	url := w.HTTP.URL()
	if code := postBytes(t, url+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	// A Restate invocation is tracked too; its admin API is away.
	restate := fixtures.Provider("restate-invocation-running.json")
	if code := postBytes(t, url+"/v1/ingest/restate", restate, signedHeaders(t, "msg_1", restate)); code != http.StatusAccepted {
		t.Fatalf("restate ingest: %d", code)
	}
	// The execution succeeds and its event is lost.
	if err := srv.SetStatus(arn, "SUCCEEDED", "", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		code, out, errOut := runCLI(t, "tenants", "get", "acme", "--server", url, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "succeeded"`) {
			return fmt.Sprintf("tenants get: %d %s %s", code, out, errOut)
		}
		return ""
	})
	eventually(t, func() string {
		metrics := getBody(t, url+"/metrics")
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
	if got := getBody(t, url+"/readyz"); !strings.Contains(got, `"ready"`) {
		t.Errorf("/readyz = %q while the restate admin api is away; the worker should stay ready", got)
	}
}

func TestRunReconcileFlags(t *testing.T) {
	awsEnv(t, "http://127.0.0.1:1", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--sfn-reconcile", "on"}, "no AWS region"},
		{[]string{"--reconcile-after=-1s"}, "--reconcile-after and --sfn-api-budget must not be negative"},
		{[]string{"--restate-services", "Provision"}, "--restate-services needs --restate-admin-url"},
		{[]string{"--restate-admin-url", "restate:9070"}, "not an http(s) URL"},
	} {
		args := append([]string{"run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"}, tt.args...)
		code, _, errOut := runCLI(t, args...)
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %s; want 1 and %q", tt.args, code, errOut, tt.want)
		}
	}
	t.Setenv("SUBSTATE_RECONCILE_INTERVAL", "-1s")
	code, _, errOut := runCLI(t, "run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--reconcile-interval must be positive") {
		t.Errorf("SUBSTATE_RECONCILE_INTERVAL=-1s: exit %d, %s", code, errOut)
	}
}

// getBody returns the body of a GET.
func getBody(t *testing.T, url string) string {
	t.Helper()
	_, body := get(t, url)
	return body
}
