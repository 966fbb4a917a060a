package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/workertest"
)

// The tests in this file keep deploy/'s alert rules and dashboard honest:
// promtool checks the rules and runs their unit tests, every alert has a
// test case where it fires and one where it does not, the dashboard's
// queries parse, and every metric the rules and the dashboard read is one
// a running worker exports (TestMonitoringMetricsExported).

var (
	rulesFile     = filepath.Join(deployDir, "prometheus", "substate-rules.yaml")
	rulesTestFile = filepath.Join(deployDir, "prometheus", "substate-rules.test.yaml")
	dashboardFile = filepath.Join(deployDir, "grafana", "substate-dashboard.json")
)

// findPromtool finds Prometheus's promtool: $SUBSTATE_PROMTOOL, the
// pinned one .ci/tools installs into bin/tools, or one on the PATH.
func findPromtool() (string, bool) {
	for _, p := range []string{os.Getenv("SUBSTATE_PROMTOOL"), filepath.Join("..", "..", "bin", "tools", "promtool")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, true
			}
		}
	}
	p, err := exec.LookPath("promtool")
	return p, err == nil
}

// noPromtool says how to get promtool.
const noPromtool = "no promtool found: run .ci/tools promtool (or set SUBSTATE_PROMTOOL) to check the alert rules and the dashboard"

// promtool returns promtool's path. Outside CI a machine without one
// skips the test; in CI (SUBSTATE_CI=1) its absence fails it, since
// .ci/run installs it.
func promtool(tb testing.TB) string {
	tb.Helper()
	p, ok := findPromtool()
	if !ok {
		if os.Getenv("SUBSTATE_CI") == "1" {
			tb.Fatal(noPromtool)
		}
		tb.Skip(noPromtool)
	}
	return p
}

// runPromtool runs promtool in dir and fails the test with its output
// when it fails.
func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestAlertRules(t *testing.T) {
	dir := filepath.Dir(rulesFile)
	t.Run("Check", func(t *testing.T) { runPromtool(t, dir, "check", "rules", filepath.Base(rulesFile)) })
	t.Run("UnitTests", func(t *testing.T) { runPromtool(t, dir, "test", "rules", filepath.Base(rulesTestFile)) })
}

// ruleFile is the part of a Prometheus rule file the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the part of a promtool unit test file the checks read.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// Every alert has a case where it fires and one where it does not, so a
// rule that never fires, or always does, fails its tests.
func TestAlertRulesTestedBothWays(t *testing.T) {
	rules := yamlDocs[ruleFile](t, rulesFile)[0]
	tests := yamlDocs[ruleTests](t, rulesTestFile)[0]
	if !slices.Contains(tests.RuleFiles, filepath.Base(rulesFile)) {
		t.Fatalf("%s does not test %s", rulesTestFile, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test case where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s has no test case where it does not fire", r.Alert)
			}
			delete(fires, r.Alert)
			delete(quiet, r.Alert)
		}
	}
	if alerts == 0 {
		t.Fatalf("%s has no alert", rulesFile)
	}
	for name := range fires {
		t.Errorf("%s tests alert %s, which %s does not have", rulesTestFile, name, rulesFile)
	}
}

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardExprs returns every query of the dashboard.
func dashboardExprs(d dashboard) []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// The dashboard is JSON Grafana imports: a title and uid, panels with
// distinct ids, each query panel on the datasource variable with at least
// one query, and every query valid PromQL (promtool parses them as the
// expressions of recording rules, Grafana's interval variables replaced).
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: want both", d.Title, d.UID)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: not on the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: a query without expr or refId", p.Title)
			}
		}
	}
	grafanaVars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, expr := range dashboardExprs(d) {
		q, _ := json.Marshal(grafanaVars.Replace(expr)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query:%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-queries.yaml"), []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("PromQL", func(t *testing.T) { runPromtool(t, dir, "check", "rules", "dashboard-queries.yaml") })
}

// metricName is a metric substate exports in a query: every such name
// starts with substate_; recording rules are named level:metric:operation,
// with colons, and so never match.
var metricName = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])(substate_[a-zA-Z0-9_]+)`)

// monitoringMetrics returns the metric names deploy/'s rules and dashboard
// read, each with where it is read.
func monitoringMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(where, expr string) {
		for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
			out[m[1]] = where
		}
	}
	for _, g := range yamlDocs[ruleFile](t, rulesFile)[0].Groups {
		for _, r := range g.Rules {
			add(rulesFile+" "+r.Record+r.Alert, r.Expr)
		}
	}
	for _, expr := range dashboardExprs(readDashboard(t)) {
		add(dashboardFile, expr)
	}
	if len(out) == 0 {
		t.Fatal("the rules and the dashboard read no substate metric")
	}
	return out
}

// scrapedNames returns the sample names and the metric families (# TYPE
// lines) of a Prometheus text exposition.
func scrapedNames(body string) (samples, families map[string]bool) {
	samples, families = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			families[name] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			samples[line[:i]] = true
		}
	}
	return samples, families
}

// TestMonitoringMetricsExported runs a worker with an SLO file and the
// evidence check on, and gives it a failed tenant, a running one that
// overstays its SLO and a body that is not JSON. Its /metrics then has a
// sample of every metric the rules and the dashboard read, so neither can
// name one the worker does not export; and docs/metrics.md describes each
// substate metric it exports.
func TestMonitoringMetricsExported(t *testing.T) {
	want := monitoringMetrics(t)
	slos := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(slos, []byte("workflows:\n  \"*\": {running: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startWorkerProcess(t, t.TempDir(), "--slo-file", slos, "--evidence-check-interval", "100ms").httpURL
	workertest.IngestTenant(t, url, "metrics-failed", "")
	if err := workertest.DeliverRow(url, "metrics-running-0", workertest.RestateRow("metrics-running", 0)); err != nil {
		t.Fatal(err)
	}
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", []byte(`{"id": "x",`), nil); code != http.StatusBadRequest {
		t.Fatalf("a body that is not JSON: %d, want 400", code)
	}
	var families map[string]bool
	workertest.EventuallyWithin(t, 20*time.Second, func() string {
		code, body := workertest.Get(t, url+"/metrics")
		if code != http.StatusOK {
			return fmt.Sprintf("GET /metrics: %d %s", code, body)
		}
		var samples map[string]bool
		samples, families = scrapedNames(body)
		var missing []string
		for name, where := range want {
			if !samples[name] {
				missing = append(missing, name+" (read by "+where+")")
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return "the worker does not export:\n" + strings.Join(missing, "\n")
		}
		return ""
	})
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range families {
		if strings.HasPrefix(name, "substate_") && !regexp.MustCompile("`"+name+"[`{]").Match(doc) {
			t.Errorf("docs/metrics.md does not describe %s", name)
		}
	}
}
