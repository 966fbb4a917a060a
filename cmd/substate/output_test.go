package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestTenantsOutput runs "tenants list" and "tenants get" against a
// worker in every format: the table, the wide table, JSON and YAML with
// the API's field names; a page that has more says how to get it, and an
// empty result says so instead of printing a bare header.
func TestTenantsOutput(t *testing.T) {
	base := startWorkerProcess(t, t.TempDir()).httpURL
	for _, tenant := range []string{"acme-1", "acme-2", "globex-1"} {
		workertest.IngestTenant(t, base, tenant, "")
	}
	workertest.Eventually(t, func() string {
		if _, out, _ := runCLI(t, "tenants", "list", "--server", base); strings.Count(out, "\n") != 4 {
			return "tenants list:\n" + out
		}
		return ""
	})
	list := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"tenants", "list", "--server", base}, args...)...)
		if code != 0 {
			t.Fatalf("tenants list %q: exit %d: %s", args, code, errOut)
		}
		return out
	}

	t.Run("MorePages", func(t *testing.T) {
		out := list("--limit", "2")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[3], "more: --page-token ") {
			t.Fatalf("a page of 2 of 3 tenants:\n%s", out)
		}
		next := list("--limit", "2", "--page-token", strings.TrimPrefix(lines[3], "more: --page-token "))
		if !strings.Contains(next, "globex-1") || strings.Contains(next, "acme-1") || strings.Contains(next, "more:") {
			t.Errorf("the next page:\n%s", next)
		}
		if all := list("--limit", "2", "--all"); strings.Count(all, "\n") != 4 || strings.Contains(all, "more:") {
			t.Errorf("--all:\n%s", all)
		}
	})
	t.Run("NoneMatch", func(t *testing.T) {
		if got := list("--tenant-prefix", "initech"); got != "no tenants match\n" {
			t.Errorf("no match: %q", got)
		}
		var page substate.TenantPage
		if err := json.Unmarshal([]byte(list("--tenant-prefix", "initech", "-o", "json")), &page); err != nil || page.Tenants == nil || len(page.Tenants) != 0 {
			t.Errorf("no match as JSON: %+v %v", page, err)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		out := list("--provider", "stepfunctions", "--tenant-prefix", "acme-", "--sub-state", "failed", "--verb", "failed", "--sort", "updatedAt:desc")
		if strings.Count(out, "\n") != 3 || strings.Contains(out, "globex") {
			t.Errorf("acme- on stepfunctions, failed:\n%s", out)
		}
		if out := list("--provider", "restate"); out != "no tenants match\n" {
			t.Errorf("--provider restate:\n%s", out)
		}
		var page substate.TenantPage
		if err := json.Unmarshal([]byte(list("--sort", "tenantId:desc", "-o", "json")), &page); err != nil || len(page.Tenants) != 3 ||
			page.Tenants[0].TenantID != "globex-1" || page.Tenants[2].TenantID != "acme-1" {
			t.Errorf("--sort tenantId:desc: %+v %v", page.Tenants, err)
		}
		code, _, errOut := runCLI(t, "tenants", "list", "--server", base, "--sort-retries", "--sort", "updatedAt:asc")
		if code == 0 || !strings.Contains(errOut, "--sort-retries") {
			t.Errorf("--sort-retries with --sort updatedAt:asc: exit %d %s", code, errOut)
		}
		code, _, errOut = runCLI(t, "tenants", "list", "--server", base, "--sort", "name")
		if code == 0 || !strings.Contains(errOut, "--sort") {
			t.Errorf("--sort name: exit %d %s", code, errOut)
		}
	})
	t.Run("Formats", func(t *testing.T) {
		wide := list("--tenant-prefix", "acme-1", "-o", "wide")
		if !strings.Contains(wide, "FINGERPRINT") || !strings.Contains(wide, "stepfunctions/") || !strings.Contains(wide, "arn:aws:states:") {
			t.Errorf("-o wide:\n%s", wide)
		}
		// The YAML reads as the JSON does: the same document.
		var fromYAML, fromJSON map[string]any
		out := list("--tenant-prefix", "acme-1", "-o", "yaml")
		if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(list("--tenant-prefix", "acme-1", "--json")), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(fromYAML), fmt.Sprint(fromJSON); got != want {
			t.Errorf("-o yaml reads\n%s\n--json reads\n%s", got, want)
		}
		if !strings.Contains(out, "tenants:\n  - tenantId: acme-1\n") || !strings.Contains(out, "workflowSubState: failed\n") {
			t.Errorf("-o yaml has not the API's field names:\n%s", out)
		}
		code, out, errOut := runCLI(t, "tenants", "get", "acme-1", "--server", base, "-o", "yaml")
		if code != 0 || !strings.HasPrefix(out, "tenantId: acme-1\n") {
			t.Errorf("tenants get -o yaml: exit %d\n%s%s", code, out, errOut)
		}
		code, _, errOut = runCLI(t, "tenants", "get", "acme-1", "--server", base, "--json", "-o", "yaml")
		if code == 0 || !strings.Contains(errOut, "--json is -o json") {
			t.Errorf("--json with -o yaml: exit %d %s", code, errOut)
		}
		code, out, _ = runCLI(t, "tenants", "groups", "--server", base, "-o", "yaml")
		if code != 0 || !strings.Contains(out, "groups:\n") || !strings.Contains(out, "by: fingerprint\n") {
			t.Errorf("tenants groups -o yaml: exit %d\n%s", code, out)
		}
	})
}

// TestTenantsListHasEveryParameter: "tenants list" has a flag for every
// query parameter of GET /v1/tenants, so a filter added to the API and
// not to the command fails here.
func TestTenantsListHasEveryParameter(t *testing.T) {
	code, help, _ := runCLI(t, "tenants", "list", "--help")
	if code != 0 {
		t.Fatalf("tenants list --help: exit %d", code)
	}
	flag := map[string]string{"minRetryCount": "min-retries"} // the rest: camelCase → kebab-case
	for _, p := range httpapi.TenantParams {
		name, ok := flag[p]
		if !ok {
			name = strings.ToLower(regexp.MustCompile(`([a-z])([A-Z])`).ReplaceAllString(p, "$1-$2"))
		}
		if !strings.Contains(help, "--"+name) {
			t.Errorf("GET /v1/tenants takes %s, tenants list has no --%s", p, name)
		}
	}
}
