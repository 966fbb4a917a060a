package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// executionService is a fake substate.ExecutionService: the routes' own
// rules (keys, scopes, redaction, bodies) are what these tests check; the
// service is tested for real in package operate and the worker's tests.
type executionService struct {
	describe func(ctx context.Context, tenant string) (substate.ExecutionInfo, error)
	act      func(ctx context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, error)
}

func (s executionService) Describe(ctx context.Context, tenant string) (substate.ExecutionInfo, error) {
	return s.describe(ctx, tenant)
}

func (s executionService) Act(ctx context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, error) {
	return s.act(ctx, req)
}

// openExecutions serves the execution routes of svc guarded by a.
func openExecutions(t *testing.T, a *httpapi.Authorizer, svc substate.ExecutionService) string {
	t.Helper()
	srv := httptest.NewServer((&httpapi.Server{Executions: svc, Auth: a}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func send(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func recordingService(got *substate.ExecutionRequest) executionService {
	return executionService{
		describe: func(_ context.Context, tenant string) (substate.ExecutionInfo, error) {
			if tenant == "nobody" {
				return substate.ExecutionInfo{}, substate.Errorf(substate.ENOTFOUND, "tenant %q not found", tenant)
			}
			return substate.ExecutionInfo{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "x1",
				Input: json.RawMessage(`{"card":"4111","tenantId":"acme-1"}`), Output: json.RawMessage(`{"ok":true}`)}, nil
		},
		act: func(_ context.Context, req substate.ExecutionRequest) (substate.ExecutionResult, error) {
			*got = req
			return substate.ExecutionResult{Action: req.Action, TenantID: req.TenantID, Who: req.Who, DryRun: req.DryRun,
				Execution: substate.ExecutionInfo{TenantID: req.TenantID, Provider: substate.ProviderEngine, ExecutionID: "x1",
					Input: json.RawMessage(`{"card":"4111","tenantId":"acme-1"}`)}}, nil
		},
	}
}

func TestExecutionRoutesKeys(t *testing.T) {
	keys := keyFile(t,
		keyLine("ops", "admin", "*", "key-ops"),
		keyLine("dash", "read", "*", "key-dash"),
		keyLine("portal", "read:raw", "acme-", "key-portal"),
		keyLine("acme-ops", "admin", "acme-", "key-acme-ops"))
	a, err := httpapi.NewAuthorizer("0.0.0.0:8080", keys)
	if err != nil {
		t.Fatal(err)
	}
	var got substate.ExecutionRequest
	url := openExecutions(t, a, recordingService(&got))
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		who                           string
	}{
		{"DescribeNoKey", "GET", "/v1/tenants/acme-1/execution", "", "", 401, ""},
		{"DescribeRead", "GET", "/v1/tenants/acme-1/execution", "key-dash", "", 403, ""},
		{"DescribeRaw", "GET", "/v1/tenants/acme-1/execution", "key-portal", "", 200, ""},
		{"DescribeOutsidePrefix", "GET", "/v1/tenants/beta-1/execution", "key-portal", "", 403, ""},
		{"DescribeUnknown", "GET", "/v1/tenants/nobody/execution", "key-ops", "", 404, ""},
		{"StopNoKey", "POST", "/v1/tenants/acme-1/execution/stop", "", "", 401, ""},
		{"StopRaw", "POST", "/v1/tenants/acme-1/execution/stop", "key-portal", "", 403, ""},
		{"StopAdmin", "POST", "/v1/tenants/acme-1/execution/stop", "key-ops", `{"reason":"wrong plan","kill":true}`, 200, "ops"},
		{"RetryPrefixAdmin", "POST", "/v1/tenants/acme-1/execution/retry", "key-acme-ops", "", 200, "acme-ops"},
		{"RetryOutsidePrefix", "POST", "/v1/tenants/beta-1/execution/retry", "key-acme-ops", "", 403, ""},
		{"UnknownAction", "POST", "/v1/tenants/acme-1/execution/pause", "key-ops", "", 404, ""},
		{"BadBody", "POST", "/v1/tenants/acme-1/execution/restart", "key-ops", `{"reason":1}`, 400, ""},
		{"UnknownField", "POST", "/v1/tenants/acme-1/execution/restart", "key-ops", `{"force":true}`, 400, ""},
		{"TrailingData", "POST", "/v1/tenants/acme-1/execution/restart", "key-ops", `{} {}`, 400, ""},
		{"BadDryRun", "POST", "/v1/tenants/acme-1/execution/restart?dryRun=maybe", "key-ops", "", 400, ""},
		{"TooLarge", "POST", "/v1/tenants/acme-1/execution/stop", "key-ops", `{"reason":"` + strings.Repeat("x", 70<<10) + `"}`, 413, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = substate.ExecutionRequest{}
			status, body := send(t, tc.method, url+tc.path, tc.key, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status >= 400 && !strings.Contains(body, `"error":{"code":`) {
				t.Errorf("error body %s is not the JSON error", body)
			}
			if got.Who != tc.who {
				t.Errorf("acted as %q, want %q", got.Who, tc.who)
			}
		})
	}
	if _, body := send(t, "POST", url+"/v1/tenants/acme-1/execution/stop", "key-ops", `{"reason":"wrong plan","kill":true}`); got.Reason != "wrong plan" || !got.Kill || got.Action != substate.ActionStop || got.DryRun {
		t.Errorf("request %+v from %s", got, body)
	}
	send(t, "POST", url+"/v1/tenants/acme-1/execution/retry?dryRun=true", "key-ops", "")
	if !got.DryRun || got.Action != substate.ActionRetry {
		t.Errorf("dry run request %+v", got)
	}
}

// TestExecutionRoutesRedaction: read:raw sees the input and output
// redacted, admin sees them as they are.
func TestExecutionRoutesRedaction(t *testing.T) {
	keys := keyFile(t, keyLine("ops", "admin", "*", "key-ops"), keyLine("portal", "read:raw", "*", "key-portal"))
	a, err := httpapi.NewAuthorizer("0.0.0.0:8080", keys)
	if err != nil {
		t.Fatal(err)
	}
	var got substate.ExecutionRequest
	url := openExecutions(t, a, recordingService(&got))
	_, body := send(t, "GET", url+"/v1/tenants/acme-1/execution", "key-portal", "")
	if strings.Contains(body, "4111") || !strings.Contains(body, "[redacted]") {
		t.Errorf("read:raw sees %s", body)
	}
	_, body = send(t, "GET", url+"/v1/tenants/acme-1/execution", "key-ops", "")
	if !strings.Contains(body, `"card":"4111"`) {
		t.Errorf("admin sees %s", body)
	}
	_, body = send(t, "POST", url+"/v1/tenants/acme-1/execution/stop?dryRun=true", "key-ops", "")
	if !strings.Contains(body, `"card":"4111"`) {
		t.Errorf("admin's action answer shows %s", body)
	}
}

// TestExecutionRoutesLoopback: without keys on loopback every request is
// let in and actions are recorded as taken by "loopback"; the input is
// still redacted, as for every reader below admin.
func TestExecutionRoutesLoopback(t *testing.T) {
	a, err := httpapi.NewAuthorizer("127.0.0.1:8080", &httpapi.Keys{})
	if err != nil {
		t.Fatal(err)
	}
	var got substate.ExecutionRequest
	url := openExecutions(t, a, recordingService(&got))
	if status, body := send(t, "POST", url+"/v1/tenants/acme-1/execution/retry", "", ""); status != 200 || got.Who != httpapi.LoopbackOperator {
		t.Fatalf("loopback retry: %d %s as %q", status, body, got.Who)
	}
	if _, body := send(t, "GET", url+"/v1/tenants/acme-1/execution", "", ""); strings.Contains(body, "4111") {
		t.Errorf("anonymous describe shows the input: %s", body)
	}
	if _, body := send(t, "POST", url+"/v1/tenants/acme-1/execution/stop?dryRun=true", "", ""); strings.Contains(body, "4111") || !strings.Contains(body, "[redacted]") {
		t.Errorf("anonymous dry run shows the input: %s", body)
	}
}

// TestExecutionRoutesKeyNamedAnonymous: on loopback with keys, a read:raw
// key that happens to be named "anonymous" is that key, not the anonymous
// caller of a server without keys, and may not act.
func TestExecutionRoutesKeyNamedAnonymous(t *testing.T) {
	a, err := httpapi.NewAuthorizer("127.0.0.1:8080", keyFile(t, keyLine("anonymous", "read:raw", "*", "key-anon")))
	if err != nil {
		t.Fatal(err)
	}
	var got substate.ExecutionRequest
	url := openExecutions(t, a, recordingService(&got))
	if status, body := send(t, "POST", url+"/v1/tenants/acme-1/execution/stop", "key-anon", ""); status != 403 || got.Who != "" {
		t.Fatalf("a read:raw key named anonymous stops: %d %s as %q", status, body, got.Who)
	}
}

// An action's executionId is what the caller saw, passed to the service,
// which skips the action when the tenant's execution is another one; it
// is bounded like every other input.
func TestExecutionRoutesExpectedExecution(t *testing.T) {
	a, err := httpapi.NewAuthorizer("127.0.0.1:8080", &httpapi.Keys{})
	if err != nil {
		t.Fatal(err)
	}
	var got substate.ExecutionRequest
	url := openExecutions(t, a, recordingService(&got)) + "/v1/tenants/acme-1/execution/stop"
	arn := "arn:aws:states:eu-west-1:123456789012:execution:provision:acme-1-7"
	if status, body := send(t, "POST", url, "", `{"reason":"r","executionId":"`+arn+`"}`); status != 200 || got.ExecutionID != arn {
		t.Fatalf("stop with the execution seen: %d %s, service asked for %q", status, body, got.ExecutionID)
	}
	got = substate.ExecutionRequest{}
	if status, body := send(t, "POST", url, "", `{"reason":"r"}`); status != 200 || got.ExecutionID != "" {
		t.Fatalf("stop without one: %d %s, service asked for %q", status, body, got.ExecutionID)
	}
	got = substate.ExecutionRequest{}
	long := strings.Repeat("x", 2049)
	if status, body := send(t, "POST", url, "", `{"executionId":"`+long+`"}`); status != 400 || !strings.Contains(body, "executionId") || got.Action != "" {
		t.Fatalf("a 2,049-byte executionId: %d %s (service called: %v)", status, body, got.Action != "")
	}
}
