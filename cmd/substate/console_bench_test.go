package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	w := startWorker(b, b.TempDir())
	url := w.HTTP.URL()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var received atomic.Int64
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() { followChanges(ctx, url, &received) })
	}
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
		if code := postBytes(b, url+"/v1/ingest/eventbridge", body.Bytes(), map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
			b.Fatalf("ingest: %d", code)
		}
		for w.View.Stats().Applied < uint64(n) {
			time.Sleep(time.Millisecond)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "changes/s")
	if streams > 0 {
		deadline := time.Now().Add(10 * time.Second)
		for received.Load() < int64(n*streams) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		b.ReportMetric(float64(received.Load())/float64(n*streams), "delivered-fraction")
		var o struct {
			Streams struct{ Open, Dropped int }
		}
		fetchJSON(b, url+"/console/api/overview", &o)
		b.ReportMetric(float64(o.Streams.Dropped), "streams-dropped")
		if got := received.Load(); got != int64(n*streams) {
			b.Errorf("streams received %d of %d changes (%d drops)", got, n*streams, o.Streams.Dropped)
		}
	}
	cancel()
	wg.Wait()
}
