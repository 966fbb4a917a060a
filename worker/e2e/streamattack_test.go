package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// consumers is how many consumers a stream of the worker has.
func consumers(tb testing.TB, w *workertest.Worker, stream string) int {
	tb.Helper()
	s, err := w.Bus.JetStream.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Consumers
}

// metricsHave waits until the worker's /metrics has every line of want.
func metricsHave(tb testing.TB, w *workertest.Worker, want ...string) {
	tb.Helper()
	workertest.Eventually(tb, func() string {
		_, _, body := workertest.APIGet(tb, w.HTTP.URL()+"/metrics", "")
		for _, line := range want {
			if !strings.Contains(body, line+"\n") {
				return "/metrics has no " + line
			}
		}
		return ""
	})
}

// The attack on the readers of the streams: 10,000 history reads, eight
// clients at a time, as anyone may make on a loopback worker without keys
// (each once opened a consumer on SUBSTATE_EVENTS that the server kept for
// five minutes, until the stream's consumers ran out). The reads hold no
// consumer: the stream has the worker's own and no more, every read
// answers 200, and verify and the worker's evidence check still work — the
// check still finds an event published without its evidence.
func TestHistoryReadsHoldNoConsumer(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.EvidenceCheckInterval = 100 * time.Millisecond })
	workertest.IngestTenant(t, w.HTTP.URL(), "acme", "")
	waitApplied(t, w, 1)
	own := consumers(t, w, substate.StreamEvents)

	const reads, clients = 10000, 8
	url := w.HTTP.URL() + "/v1/tenants/acme/history?raw=true"
	var wg sync.WaitGroup
	failures := make(chan string, clients)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < reads; i += clients {
				resp, err := http.Get(url)
				if err != nil {
					failures <- fmt.Sprintf("read %d: %v", i, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"subState":"failed"`) {
					failures <- fmt.Sprintf("read %d: %d %.200s", i, resp.StatusCode, body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
	if got := consumers(t, w, substate.StreamEvents); got != own {
		t.Fatalf("%s has %d consumers after %d history reads, want the worker's own %d", substate.StreamEvents, got, reads, own)
	}
	if v := verifyEqual(t, w); v.Evidence == nil || v.Evidence.Counts["verified"] != 1 {
		t.Fatalf("verify after the reads: evidence %+v, want 1 verified", v.Evidence)
	}
	forged := substate.EventData{TenantID: "acme", Provider: substate.ProviderEngine, ExecutionID: "run-x",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
	forged.Normalize()
	if err := publishers.NewJetStream(w.Bus.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", forged)}); err != nil {
		t.Fatal(err)
	}
	metricsHave(t, w, `substate_evidence_events_total{outcome="missing"} 1`)
}
