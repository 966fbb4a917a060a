package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMetrics checks that /metrics counts what the pipeline did: ingest by
// provider and outcome with its latency, normalized events, dead letters by
// stage and reason, and unknown provider states.
func TestMetrics(t *testing.T) {
	w := startWorker(t, t.TempDir())
	ingest := w.HTTP.URL() + "/v1/ingest/eventbridge"
	example, err := os.ReadFile(examplePath("stepfunctions-failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	unknown := strings.Replace(strings.Replace(string(example), `"FAILED"`, `"HIBERNATING"`, 1), "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", "u-1", 1)
	noTenant := strings.Replace(strings.Replace(string(example), "tenantId", "owner", 1), "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", "nt-1", 1)
	for _, tc := range []struct {
		body string
		want int
	}{{string(example), 202}, {unknown, 202}, {noTenant, 202}, {`{"id":`, 400}} {
		if got := postBytes(t, ingest, []byte(tc.body), nil); got != tc.want {
			t.Fatalf("post %.30q: %d, want %d", tc.body, got, tc.want)
		}
	}
	want := []string{
		`substate_ingested_total{outcome="accepted",provider="stepfunctions"} 3`,
		`substate_ingested_total{outcome="invalid",provider="stepfunctions"} 1`,
		`substate_ingest_duration_seconds_count{provider="stepfunctions"} 4`,
		`substate_normalized_total{provider="stepfunctions"} 2`,
		`substate_dead_lettered_total{reason="invalid",stage="ingest"} 1`,
		`substate_dead_lettered_total{reason="tenant_unresolved",stage="normalize"} 1`,
		`substate_unknown_states_total{provider="stepfunctions"} 1`,
		`substate_view_commits_total 1`, // the unknown state is older than FAILED: stale
	}
	eventually(t, func() string {
		code, body := get(t, w.HTTP.URL()+"/metrics")
		if code != http.StatusOK {
			return "GET /metrics: " + body
		}
		for _, line := range want {
			if !strings.Contains(body, line+"\n") {
				return "/metrics has no " + line
			}
		}
		if !regexp.MustCompile(`\nsubstate_view_written_bytes_total [1-9][0-9]{3,}\n`).MatchString(body) {
			return "/metrics has no substate_view_written_bytes_total of a commit's pages"
		}
		return ""
	})
}
