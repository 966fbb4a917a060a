package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestReadCommandsWithKeys runs the commands that read a worker with
// read-API keys: "tenants" with --api-key or SUBSTATE_API_KEY, and those
// that read the streams, which show the providers' input and output
// redacted unless asked otherwise. What each key may read on each route:
// TestReadAPIKeys in worker/e2e.
func TestReadCommandsWithKeys(t *testing.T) {
	keys := map[string]string{"reader": "k-reader", "admin": "k-admin", "portal": "k-portal"}
	keyFile := filepath.Join(t.TempDir(), "api-keys")
	lines := []string{
		"reader read * sha256:" + workertest.KeyHash(keys["reader"]),
		"admin admin * sha256:" + workertest.KeyHash(keys["admin"]),
		"portal read:raw acme- sha256:" + workertest.KeyHash(keys["portal"]),
	}
	if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := startWorkerProcess(t, dataDir, "--api-keys-file", keyFile, "--ingest-api-key", "ingest", "--redact-allow", "$.order.id")
	for _, tenant := range []string{"acme-1", "globex-1"} {
		workertest.IngestTenant(t, p.httpURL, tenant, "ingest")
	}
	base := p.httpURL
	workertest.Eventually(t, func() string {
		if code, _, body := workertest.APIGet(t, base+"/v1/tenants", keys["admin"]); !strings.Contains(body, "globex-1") || !strings.Contains(body, "acme-1") {
			return fmt.Sprintf("tenants: %d %s", code, body)
		}
		return ""
	})

	t.Run("TenantPrefix", func(t *testing.T) {
		code, out, errOut := runCLI(t, "tenants", "list", "--server", base, "--api-key", keys["portal"])
		if code != 0 || !strings.Contains(out, "acme-1") || strings.Contains(out, "globex") {
			t.Errorf("tenants list --api-key portal: %d\n%s%s", code, out, errOut)
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
		nats := []string{"--nats-url", p.nats, "--data-dir", dataDir}
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
}
