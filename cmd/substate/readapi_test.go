package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
)

func hashHex(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// apiGet GETs a path of the worker with key (none when empty) and returns
// the status, the error code of a JSON error body, and the body.
func apiGet(tb testing.TB, url, key string) (int, string, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &e); err != nil {
			tb.Fatalf("GET %s: %d with a body that is not the JSON error: %s", url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e.Error.Code, string(b)
}

// secretInput is an execution input with the tenant, an order id and
// secrets, as EventBridge carries it: JSON text.
const secretInput = `{"tenantId":"%s","order":{"id":"ord-1"},"dbPassword":"hunter2","stripeKey":"sk_live_abc"}`

// ingestTenant posts the failed example for a tenant, with secrets in its
// input and a token in its output.
func ingestTenant(tb testing.TB, w *testWorker, tenant, ingestKey string) {
	tb.Helper()
	example, err := os.ReadFile(examplePath("stepfunctions-failed.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(example, &ev); err != nil {
		tb.Fatal(err)
	}
	ev["id"] = "ev-" + tenant
	d := ev["detail"].(map[string]any)
	d["input"] = fmt.Sprintf(secretInput, tenant)
	d["output"] = `{"token":"tok_secret","receipt":"r-1"}`
	d["executionArn"] = d["executionArn"].(string) + "-" + tenant
	body, _ := json.Marshal(ev)
	if code := postBytes(tb, w.HTTP.URL()+"/v1/ingest/eventbridge", body, map[string]string{"X-Api-Key": ingestKey}); code != http.StatusAccepted {
		tb.Fatalf("ingest %s: %d", tenant, code)
	}
}

// TestReadAPIKeys runs "substate run" with a key file and tries every read
// route with no key, an unknown key, each scope and a tenant-prefix key.
func TestReadAPIKeys(t *testing.T) {
	keys := map[string]string{"reader": "k-reader", "raw": "k-raw", "admin": "k-admin", "portal": "k-portal"}
	keyFile := filepath.Join(t.TempDir(), "api-keys")
	writeKeys := func(lines ...string) {
		if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lines := []string{
		"# name scopes prefix hash",
		"reader read * sha256:" + hashHex(keys["reader"]),
		"raw read,read:raw * sha256:" + hashHex(keys["raw"]),
		"admin admin * sha256:" + hashHex(keys["admin"]),
		"portal read:raw acme- sha256:" + hashHex(keys["portal"]),
	}
	writeKeys(lines...)
	dataDir := t.TempDir()
	w := startWorker(t, dataDir, "--api-keys-file", keyFile, "--ingest-api-key", "ingest", "--redact-allow", "$.order.id")
	for _, tenant := range []string{"acme-1", "globex-1"} {
		ingestTenant(t, w, tenant, "ingest")
	}
	base := w.HTTP.URL()
	eventually(t, func() string {
		if code, _, body := apiGet(t, base+"/v1/tenants", keys["admin"]); !strings.Contains(body, "globex-1") || !strings.Contains(body, "acme-1") {
			return fmt.Sprintf("tenants: %d %s", code, body)
		}
		return ""
	})

	routes := []struct {
		path  string
		scope string // the least scope that reads it
	}{
		{"/v1/tenants", "read"},
		{"/v1/tenants?hasError=true", "read"},
		{"/v1/tenants/acme-1", "read"},
		{"/v1/tenants/acme-1/history", "read"},
		{"/v1/tenants/acme-1/history?raw=true", "read:raw"},
		{"/v1/view/checkpoint", "read"},
		{"/metrics", "read"},
	}
	for _, r := range routes {
		t.Run("NoKey"+r.path, func(t *testing.T) {
			if code, ecode, _ := apiGet(t, base+r.path, ""); code != http.StatusUnauthorized || ecode != "unauthorized" {
				t.Errorf("%d %s, want 401", code, ecode)
			}
			if code, _, _ := apiGet(t, base+r.path, "k-unknown"); code != http.StatusUnauthorized {
				t.Errorf("unknown key: %d, want 401", code)
			}
			if code, _, _ := apiGet(t, base+r.path, keys["admin"]); code != http.StatusOK {
				t.Errorf("admin: %d, want 200", code)
			}
			code, ecode, _ := apiGet(t, base+r.path, keys["reader"])
			if want := map[bool]int{true: 200, false: 403}[r.scope == "read"]; code != want {
				t.Errorf("read scope: %d %s, want %d", code, ecode, want)
			}
		})
	}

	t.Run("Executions", func(t *testing.T) {
		// Describing needs read:raw; acting needs admin, whatever the dry run.
		for key, want := range map[string]int{"": 401, keys["reader"]: 403, keys["raw"]: 200, keys["admin"]: 200} {
			if code, ecode, body := apiGet(t, base+"/v1/tenants/acme-1/execution", key); code != want && !(want == 200 && code == http.StatusServiceUnavailable) {
				t.Errorf("describe with key %q: %d %s %s, want %d", key, code, ecode, body, want)
			}
		}
		if code, ecode, _ := apiGet(t, base+"/v1/tenants/globex-1/execution", keys["portal"]); code != http.StatusForbidden {
			t.Errorf("portal describes globex-1: %d %s, want 403", code, ecode)
		}
		for key, want := range map[string]int{"": 401, keys["reader"]: 403, keys["raw"]: 403, keys["portal"]: 403} {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/tenants/acme-1/execution/stop?dryRun=true", strings.NewReader(`{"reason":"test"}`))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("stop with key %q: %d, want %d", key, resp.StatusCode, want)
			}
		}
	})

	t.Run("TenantPrefix", func(t *testing.T) {
		_, _, body := apiGet(t, base+"/v1/tenants", keys["portal"])
		if !strings.Contains(body, "acme-1") || strings.Contains(body, "globex") {
			t.Errorf("portal list: %s", body)
		}
		_, _, body = apiGet(t, base+"/v1/tenants?hasError=true&limit=1", keys["portal"])
		if !strings.Contains(body, "acme-1") || strings.Contains(body, "globex") {
			t.Errorf("portal filtered list: %s", body)
		}
		for _, p := range []string{"/v1/tenants/globex-1", "/v1/tenants/globex-1/history", "/v1/tenants/globex-1/history?raw=true"} {
			if code, ecode, body := apiGet(t, base+p, keys["portal"]); code != http.StatusForbidden || ecode != "forbidden" || strings.Contains(body, "hunter2") {
				t.Errorf("portal %s: %d %s %s, want 403", p, code, ecode, body)
			}
		}
		for _, p := range []string{"/v1/tenants/acme-1", "/v1/tenants/acme-1/history?raw=true"} {
			if code, _, _ := apiGet(t, base+p, keys["portal"]); code != http.StatusOK {
				t.Errorf("portal %s: %d, want 200", p, code)
			}
		}
		code, out, errOut := runCLI(t, "tenants", "list", "--server", base, "--api-key", keys["portal"])
		if code != 0 || !strings.Contains(out, "acme-1") || strings.Contains(out, "globex") {
			t.Errorf("tenants list --api-key portal: %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("RawRedacted", func(t *testing.T) {
		for _, key := range []string{keys["raw"], keys["portal"]} {
			_, _, body := apiGet(t, base+"/v1/tenants/acme-1/history?raw=true", key)
			for _, secret := range []string{"hunter2", "sk_live_abc", "tok_secret", "r-1"} {
				if strings.Contains(body, secret) {
					t.Errorf("read:raw sees %s: %s", secret, body)
				}
			}
			for _, shown := range []string{`[redacted]`, `\"tenantId\":\"acme-1\"`, `\"id\":\"ord-1\"`} {
				if !strings.Contains(body, shown) {
					t.Errorf("read:raw history lacks %s: %s", shown, body)
				}
			}
		}
		_, _, body := apiGet(t, base+"/v1/tenants/acme-1/history?raw=true", keys["admin"])
		for _, secret := range []string{"hunter2", "sk_live_abc", "tok_secret"} {
			if !strings.Contains(body, secret) {
				t.Errorf("admin does not see %s: %s", secret, body)
			}
		}
	})

	t.Run("CLI", func(t *testing.T) {
		code, _, errOut := runCLI(t, "tenants", "get", "acme-1", "--server", base)
		if code != 1 || !strings.Contains(errOut, "HTTP 401") {
			t.Errorf("tenants get without a key: %d %s", code, errOut)
		}
		t.Setenv("SUBSTATE_API_KEY", keys["reader"])
		if code, out, errOut := runCLI(t, "tenants", "get", "acme-1", "--server", base); code != 0 || !strings.Contains(out, "acme-1") {
			t.Errorf("tenants get with SUBSTATE_API_KEY: %d %s %s", code, out, errOut)
		}
	})

	t.Run("CLIRedacts", func(t *testing.T) {
		nats := []string{"--nats-url", w.Bus.ClientURL(), "--data-dir", dataDir}
		code, out, errOut := runCLI(t, append([]string{"audit", "--tenant", "acme-1", "--raw", "--redact-allow", "$.order.id"}, nats...)...)
		if code != 0 || strings.Contains(out, "hunter2") || strings.Contains(out, "tok_secret") || !strings.Contains(out, `\"id\":\"ord-1\"`) || !strings.Contains(out, "[redacted]") {
			t.Errorf("audit --raw: %d\n%s%s", code, out, errOut)
		}
		code, out, _ = runCLI(t, append([]string{"audit", "--tenant", "acme-1", "--raw", "--json"}, nats...)...)
		if code != 0 || strings.Contains(out, "hunter2") || !strings.Contains(out, "[redacted]") {
			t.Errorf("audit --raw --json: %d\n%s", code, out)
		}
		code, out, _ = runCLI(t, append([]string{"audit", "--tenant", "acme-1", "--raw", "--unredacted"}, nats...)...)
		if code != 0 || !strings.Contains(out, "hunter2") {
			t.Errorf("audit --raw --unredacted: %d\n%s", code, out)
		}
	})

	t.Run("ReloadOnChange", func(t *testing.T) {
		writeKeys(append(lines[:1], "late read * sha256:"+hashHex("k-late"))...)
		eventually(t, func() string {
			if code, _, _ := apiGet(t, base+"/v1/tenants", "k-late"); code != http.StatusOK {
				return fmt.Sprintf("new key: %d", code)
			}
			if code, _, _ := apiGet(t, base+"/v1/tenants", keys["admin"]); code != http.StatusUnauthorized {
				return fmt.Sprintf("removed key: %d", code)
			}
			return ""
		})
		writeKeys("not a key line")
		writeKeys("not a key line", "# still broken")
		if code, _, _ := apiGet(t, base+"/v1/tenants", "k-late"); code != http.StatusOK {
			t.Errorf("a broken key file replaced the keys in force: %d", code)
		}
	})
}

// TestLoopbackReadsNeedNoKey: without keys on loopback every read works
// as before, raw evidence redacted.
func TestLoopbackReadsNeedNoKey(t *testing.T) {
	w := startWorker(t, t.TempDir())
	ingestTenant(t, w, "acme-1", "")
	eventually(t, func() string {
		code, _, body := apiGet(t, w.HTTP.URL()+"/v1/tenants/acme-1/history?raw=true", "")
		if code != http.StatusOK || !strings.Contains(body, `\"tenantId\":\"acme-1\"`) || !strings.Contains(body, "[redacted]") || strings.Contains(body, "hunter2") {
			return fmt.Sprintf("history: %d %s", code, body)
		}
		// History reads the streams; the view may project a moment later.
		if code, _, body := apiGet(t, w.HTTP.URL()+"/v1/tenants/acme-1", ""); code != http.StatusOK {
			return fmt.Sprintf("view: %d %s", code, body)
		}
		return ""
	})
	for _, p := range []string{"/v1/tenants", "/v1/tenants/acme-1", "/v1/view/checkpoint", "/metrics"} {
		if code, _, _ := apiGet(t, w.HTTP.URL()+p, ""); code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
	}
}

// TestMetricsAddr: /metrics moves to a listener of its own, without keys;
// the keys come from the environment.
func TestMetricsAddr(t *testing.T) {
	t.Setenv("SUBSTATE_API_KEYS", "r read * sha256:"+hashHex("k")+"; other admin * sha256:"+hashHex("o"))
	w := startWorker(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	if code, _, _ := apiGet(t, w.HTTP.URL()+"/v1/tenants", ""); code != http.StatusUnauthorized {
		t.Errorf("keys from SUBSTATE_API_KEYS: no key %d, want 401", code)
	}
	if code, _, _ := apiGet(t, w.HTTP.URL()+"/v1/tenants", "o"); code != http.StatusOK {
		t.Errorf("keys from SUBSTATE_API_KEYS: second key %d, want 200", code)
	}
	m := w.MetricsHTTP.URL()
	if code, _, body := apiGet(t, m+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "substate_view_commits_total") {
		t.Errorf("metrics addr /metrics: %d", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		eventually(t, func() string {
			if code, _, _ := apiGet(t, m+p, ""); code != http.StatusOK {
				return fmt.Sprintf("%s: %d", p, code)
			}
			return ""
		})
	}
	if code, _, _ := apiGet(t, m+"/v1/tenants", ""); code != http.StatusNotFound {
		t.Errorf("metrics addr serves the tenants: %d", code)
	}
	if code, _, _ := apiGet(t, w.HTTP.URL()+"/metrics", "k"); code != http.StatusNotFound {
		t.Errorf("http addr still serves /metrics: %d", code)
	}
}

// TestWorkerCountsForgedEvents: the worker's own evidence check counts an
// event published straight on SUBSTATE_EVENTS as missing its evidence,
// next to the genuine one.
func TestWorkerCountsForgedEvents(t *testing.T) {
	w := startWorker(t, t.TempDir(), "--evidence-check-interval", "50ms")
	ingestTenant(t, w, "acme-1", "")
	forged := substate.EventData{TenantID: "acme-1", Provider: substate.ProviderEngine, ExecutionID: "run-x",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
	forged.Normalize()
	if err := publishers.NewJetStream(w.Bus.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", forged)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		_, _, body := apiGet(t, w.HTTP.URL()+"/metrics", "")
		for _, want := range []string{`substate_evidence_events_total{outcome="verified"} 1`, `substate_evidence_events_total{outcome="missing"} 1`} {
			if !strings.Contains(body, want) {
				return "metrics lack " + want
			}
		}
		return ""
	})
}

// TestIngestRoleRoutes: a role without a view serves no checkpoint (it
// had none to tell), and its history still needs a key.
func TestIngestRoleRoutes(t *testing.T) {
	w := startWorker(t, t.TempDir(), "--role", "ingest", "--api-keys", "r read * sha256:"+hashHex("k"))
	if code, _, _ := apiGet(t, w.HTTP.URL()+"/v1/view/checkpoint", "k"); code != http.StatusNotFound {
		t.Errorf("checkpoint on the ingest role: %d, want 404", code)
	}
	if code, _, _ := apiGet(t, w.HTTP.URL()+"/v1/tenants/x/history", ""); code != http.StatusUnauthorized {
		t.Errorf("history without a key: %d, want 401", code)
	}
}
