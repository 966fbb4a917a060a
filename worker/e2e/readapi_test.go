package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestReadAPIKeys runs a worker with a key file and tries every read route
// with no key, an unknown key, each scope and a tenant-prefix key. The
// commands that read with keys: TestReadCommandsWithKeys in cmd/substate.
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
		"reader read * sha256:" + workertest.KeyHash(keys["reader"]),
		"raw read,read:raw * sha256:" + workertest.KeyHash(keys["raw"]),
		"admin admin * sha256:" + workertest.KeyHash(keys["admin"]),
		"portal read:raw acme- sha256:" + workertest.KeyHash(keys["portal"]),
	}
	writeKeys(lines...)
	w := workertest.Start(t, func(f *worker.Flags) {
		f.APIKeysFile, f.IngestAPIKey, f.RedactAllow = keyFile, "ingest", []string{"$.order.id"}
	})
	for _, tenant := range []string{"acme-1", "globex-1"} {
		workertest.IngestTenant(t, w.HTTP.URL(), tenant, "ingest")
	}
	base := w.HTTP.URL()
	workertest.Eventually(t, func() string {
		if code, _, body := workertest.APIGet(t, base+"/v1/tenants", keys["admin"]); !strings.Contains(body, "globex-1") || !strings.Contains(body, "acme-1") {
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
			if code, ecode, _ := workertest.APIGet(t, base+r.path, ""); code != http.StatusUnauthorized || ecode != "unauthorized" {
				t.Errorf("%d %s, want 401", code, ecode)
			}
			if code, _, _ := workertest.APIGet(t, base+r.path, "k-unknown"); code != http.StatusUnauthorized {
				t.Errorf("unknown key: %d, want 401", code)
			}
			if code, _, _ := workertest.APIGet(t, base+r.path, keys["admin"]); code != http.StatusOK {
				t.Errorf("admin: %d, want 200", code)
			}
			code, ecode, _ := workertest.APIGet(t, base+r.path, keys["reader"])
			if want := map[bool]int{true: 200, false: 403}[r.scope == "read"]; code != want {
				t.Errorf("read scope: %d %s, want %d", code, ecode, want)
			}
		})
	}

	t.Run("Executions", func(t *testing.T) {
		// Describing needs read:raw; acting needs admin, whatever the dry run.
		for key, want := range map[string]int{"": 401, keys["reader"]: 403, keys["raw"]: 200, keys["admin"]: 200} {
			if code, ecode, body := workertest.APIGet(t, base+"/v1/tenants/acme-1/execution", key); code != want && !(want == 200 && code == http.StatusServiceUnavailable) {
				t.Errorf("describe with key %q: %d %s %s, want %d", key, code, ecode, body, want)
			}
		}
		if code, ecode, _ := workertest.APIGet(t, base+"/v1/tenants/globex-1/execution", keys["portal"]); code != http.StatusForbidden {
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
		_, _, body := workertest.APIGet(t, base+"/v1/tenants", keys["portal"])
		if !strings.Contains(body, "acme-1") || strings.Contains(body, "globex") {
			t.Errorf("portal list: %s", body)
		}
		_, _, body = workertest.APIGet(t, base+"/v1/tenants?hasError=true&limit=1", keys["portal"])
		if !strings.Contains(body, "acme-1") || strings.Contains(body, "globex") {
			t.Errorf("portal filtered list: %s", body)
		}
		for _, p := range []string{"/v1/tenants/globex-1", "/v1/tenants/globex-1/history", "/v1/tenants/globex-1/history?raw=true"} {
			if code, ecode, body := workertest.APIGet(t, base+p, keys["portal"]); code != http.StatusForbidden || ecode != "forbidden" || strings.Contains(body, "hunter2") {
				t.Errorf("portal %s: %d %s %s, want 403", p, code, ecode, body)
			}
		}
		for _, p := range []string{"/v1/tenants/acme-1", "/v1/tenants/acme-1/history?raw=true"} {
			if code, _, _ := workertest.APIGet(t, base+p, keys["portal"]); code != http.StatusOK {
				t.Errorf("portal %s: %d, want 200", p, code)
			}
		}
	})

	t.Run("RawRedacted", func(t *testing.T) {
		for _, key := range []string{keys["raw"], keys["portal"]} {
			_, _, body := workertest.APIGet(t, base+"/v1/tenants/acme-1/history?raw=true", key)
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
		_, _, body := workertest.APIGet(t, base+"/v1/tenants/acme-1/history?raw=true", keys["admin"])
		for _, secret := range []string{"hunter2", "sk_live_abc", "tok_secret"} {
			if !strings.Contains(body, secret) {
				t.Errorf("admin does not see %s: %s", secret, body)
			}
		}
	})

	t.Run("ReloadOnChange", func(t *testing.T) {
		writeKeys(append(lines[:1], "late read * sha256:"+workertest.KeyHash("k-late"))...)
		workertest.Eventually(t, func() string {
			if code, _, _ := workertest.APIGet(t, base+"/v1/tenants", "k-late"); code != http.StatusOK {
				return fmt.Sprintf("new key: %d", code)
			}
			if code, _, _ := workertest.APIGet(t, base+"/v1/tenants", keys["admin"]); code != http.StatusUnauthorized {
				return fmt.Sprintf("removed key: %d", code)
			}
			return ""
		})
		writeKeys("not a key line")
		writeKeys("not a key line", "# still broken")
		if code, _, _ := workertest.APIGet(t, base+"/v1/tenants", "k-late"); code != http.StatusOK {
			t.Errorf("a broken key file replaced the keys in force: %d", code)
		}
	})
}

// TestLoopbackReadsNeedNoKey: without keys on loopback every read works
// as before, raw evidence redacted.
func TestLoopbackReadsNeedNoKey(t *testing.T) {
	w := workertest.Start(t)
	workertest.IngestTenant(t, w.HTTP.URL(), "acme-1", "")
	workertest.Eventually(t, func() string {
		code, _, body := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants/acme-1/history?raw=true", "")
		if code != http.StatusOK || !strings.Contains(body, `\"tenantId\":\"acme-1\"`) || !strings.Contains(body, "[redacted]") || strings.Contains(body, "hunter2") {
			return fmt.Sprintf("history: %d %s", code, body)
		}
		// History reads the streams; the view may project a moment later.
		if code, _, body := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants/acme-1", ""); code != http.StatusOK {
			return fmt.Sprintf("view: %d %s", code, body)
		}
		return ""
	})
	for _, p := range []string{"/v1/tenants", "/v1/tenants/acme-1", "/v1/view/checkpoint", "/metrics"} {
		if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+p, ""); code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
	}
}

// TestMetricsAddr: /metrics moves to a listener of its own, without keys;
// the keys are lines separated by ';', as SUBSTATE_API_KEYS gives them
// (TestRunReadsEnvironment in cmd/substate).
func TestMetricsAddr(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) {
		f.APIKeys = "r read * sha256:" + workertest.KeyHash("k") + "; other admin * sha256:" + workertest.KeyHash("o")
		f.MetricsAddr = "127.0.0.1:0"
	})
	if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants", ""); code != http.StatusUnauthorized {
		t.Errorf("keys separated by ';': no key %d, want 401", code)
	}
	if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants", "o"); code != http.StatusOK {
		t.Errorf("keys separated by ';': second key %d, want 200", code)
	}
	m := w.MetricsHTTP.URL()
	if code, _, body := workertest.APIGet(t, m+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "substate_view_commits_total") {
		t.Errorf("metrics addr /metrics: %d", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		workertest.Eventually(t, func() string {
			if code, _, _ := workertest.APIGet(t, m+p, ""); code != http.StatusOK {
				return fmt.Sprintf("%s: %d", p, code)
			}
			return ""
		})
	}
	if code, _, _ := workertest.APIGet(t, m+"/v1/tenants", ""); code != http.StatusNotFound {
		t.Errorf("metrics addr serves the tenants: %d", code)
	}
	if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+"/metrics", "k"); code != http.StatusNotFound {
		t.Errorf("http addr still serves /metrics: %d", code)
	}
}

// TestWorkerCountsForgedEvents: the worker's own evidence check counts an
// event published straight on SUBSTATE_EVENTS as missing its evidence,
// next to the genuine one.
func TestWorkerCountsForgedEvents(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.EvidenceCheckInterval = 50 * time.Millisecond })
	workertest.IngestTenant(t, w.HTTP.URL(), "acme-1", "")
	forged := substate.EventData{TenantID: "acme-1", Provider: substate.ProviderEngine, ExecutionID: "run-x",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
	forged.Normalize()
	if err := publishers.NewJetStream(w.Bus.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", forged)}); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		_, _, body := workertest.APIGet(t, w.HTTP.URL()+"/metrics", "")
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
	w := workertest.Start(t, func(f *worker.Flags) {
		f.Role, f.APIKeys = worker.RoleIngest, "r read * sha256:"+workertest.KeyHash("k")
	})
	if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+"/v1/view/checkpoint", "k"); code != http.StatusNotFound {
		t.Errorf("checkpoint on the ingest role: %d, want 404", code)
	}
	if code, _, _ := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants/x/history", ""); code != http.StatusUnauthorized {
		t.Errorf("history without a key: %d, want 401", code)
	}
}
