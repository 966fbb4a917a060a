package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
)

// BenchmarkConsoleFanOut measures the worker's throughput, from the
// ingress to the view, with no console open and with 100 open change
// streams, and reports what the streams received. Each iteration ingests
// 500 Step Functions events of new tenants (500 view changes) and waits
// until the view holds them.
func BenchmarkConsoleFanOut(b *testing.B) {
	for _, streams := range []int{0, 100} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchFanOut(b, streams) })
	}
}

func benchFanOut(b *testing.B, streams int) {
	const perIter = 500
	w := workertest.Start(b)
	url := w.HTTP.URL()
	fans, err := bench.OpenConsoleFans(url, streams) // open before the first change
	if err != nil {
		b.Fatal(err)
	}
	defer fans.Close()
	t0 := time.Now().Add(-time.Hour)
	n := 0
	var elapsed time.Duration
	for b.Loop() {
		var body bytes.Buffer
		body.WriteByte('[')
		for i := range perIter {
			if i > 0 {
				body.WriteByte(',')
			}
			n++
			tenant := fmt.Sprintf("bench-%07d", n)
			body.Write(sfnEvent(fmt.Sprintf("evt-%d", n), tenant, "run-"+tenant, "RUNNING", t0, t0, ""))
		}
		body.WriteByte(']')
		start := time.Now()
		if code := workertest.Post(b, url+"/v1/ingest/eventbridge", body.Bytes(), map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
			b.Fatalf("ingest: %d", code)
		}
		for w.View.Stats().Applied < uint64(n) {
			time.Sleep(time.Millisecond)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "changes/s")
	if streams > 0 {
		delivered := fans.Delivered(int64(n*streams), 10*time.Second)
		b.ReportMetric(delivered, "delivered-fraction")
		var o struct {
			Streams struct{ Open, Dropped int }
		}
		workertest.GetJSON(b, url+"/console/api/overview", &o)
		b.ReportMetric(float64(o.Streams.Dropped), "streams-dropped")
		b.ReportMetric(float64(fans.Resets()), "resets")
		// A stream misses changes only when the console dropped it for
		// being slow and told it so (a reset), and never gets one twice.
		if fans.Repeats() != 0 || delivered > 1 || (delivered < 1 && fans.Resets() == 0) {
			b.Errorf("streams received %.4f of %d changes (%d drops, %d resets, %d repeats)", delivered, n*streams, o.Streams.Dropped, fans.Resets(), fans.Repeats())
		}
	}
}
