package e2e_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestMetrics checks that /metrics counts what the pipeline did: ingest by
// provider and outcome with its latency, normalized events, dead letters by
// stage and reason, and unknown provider states.
func TestMetrics(t *testing.T) {
	w := workertest.Start(t)
	ingest := w.HTTP.URL() + "/v1/ingest/eventbridge"
	example := workertest.Example(t, "stepfunctions-failed.json")
	unknown := strings.Replace(strings.Replace(string(example), `"FAILED"`, `"HIBERNATING"`, 1), "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", "u-1", 1)
	noTenant := strings.Replace(strings.Replace(string(example), "tenantId", "owner", 1), "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", "nt-1", 1)
	for _, tc := range []struct {
		body string
		want int
	}{{string(example), 202}, {unknown, 202}, {noTenant, 202}, {`{"id":`, 400}} {
		if got := workertest.Post(t, ingest, []byte(tc.body), nil); got != tc.want {
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
	workertest.Eventually(t, func() string {
		code, body := workertest.Get(t, w.HTTP.URL()+"/metrics")
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

// TestViewMetrics checks the view's and the pipeline's time-based metrics
// after one delivery: the change's freshness (the example's stop date is
// years ago), the tenants by sub-state and provider with every other pair
// at 0, when the view last applied and the change feed last published,
// and each consumer's oldest unprocessed message (none once settled).
func TestViewMetrics(t *testing.T) {
	w := workertest.Start(t)
	started := time.Now()
	workertest.IngestTenant(t, w.HTTP.URL(), "acme-1", "")
	want := []string{
		`substate_view_freshness_seconds_count{provider="stepfunctions"} 1`,
		`substate_view_freshness_seconds_bucket{provider="stepfunctions",le="86400"} 0`, // older than a day
		`substate_view_freshness_seconds_count{provider="restate"} 0`,
		`substate_tenants{provider="stepfunctions",sub_state="failed"} 1`,
		`substate_tenants{provider="restate",sub_state="running"} 0`,
		`substate_consumer_oldest_unprocessed_age_seconds{consumer="substate-normalizer"} 0`,
		`substate_consumer_oldest_unprocessed_age_seconds{consumer="substate-projector"} 0`,
	}
	timestamps := []string{"substate_view_last_applied_timestamp_seconds", "substate_change_feed_last_published_timestamp_seconds"}
	workertest.Eventually(t, func() string {
		code, body := workertest.Get(t, w.HTTP.URL()+"/metrics")
		if code != http.StatusOK {
			return "GET /metrics: " + body
		}
		for _, line := range want {
			if !strings.Contains(body, line+"\n") {
				return "/metrics has no " + line
			}
		}
		for _, name := range timestamps {
			m := regexp.MustCompile(`\n` + name + ` (\S+)\n`).FindStringSubmatch(body)
			if m == nil {
				return "/metrics has no " + name
			}
			if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < float64(started.Unix()) {
				return fmt.Sprintf("%s is %s, before the delivery at %d", name, m[1], started.Unix())
			}
		}
		return ""
	})
}
