package e2e_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// Admission control in the worker: while the normalizer's consumer is
// paused the raw backlog grows, and once the worker has measured it at
// --ingest-max-backlog, ingest answers 429 with Retry-After; once the
// normalizer drains it, 202 again.
func TestRunThrottlesOnRawBacklog(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.IngestMaxBacklog = 5 })
	url := w.HTTP.URL()
	js := w.Bus.JetStream
	if _, err := js.PauseConsumer(t.Context(), substate.StreamRaw, bus.ConsumerNormalizer, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if status, _ := postStatus(t, url, fmt.Sprintf("held%d", i)); status != http.StatusAccepted {
			t.Fatalf("event %d under the bound: %d", i, status)
		}
	}
	workertest.EventuallyWithin(t, 10*time.Second, func() string {
		if status, retryAfter := postStatus(t, url, "over"); status != http.StatusTooManyRequests || retryAfter != "5" {
			return fmt.Sprintf("with 5 raw events waiting: %d Retry-After %q, want 429 with Retry-After 5", status, retryAfter)
		}
		return ""
	})
	if _, err := js.ResumeConsumer(t.Context(), substate.StreamRaw, bus.ConsumerNormalizer); err != nil {
		t.Fatal(err)
	}
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		if status, _ := postStatus(t, url, "after"); status != http.StatusAccepted {
			return fmt.Sprintf("after the backlog drained: %d, want 202", status)
		}
		return ""
	})
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		for _, id := range []string{"held4", "after"} {
			if _, err := w.View.Tenant(t.Context(), id); err != nil {
				return id + ": " + err.Error()
			}
		}
		return ""
	})
}
