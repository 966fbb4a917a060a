package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/replay"
)

// heldReader is a history reader with the worker's bound on reads at
// once (replay.MaxConcurrentReads turns, as replay.History has). A read of
// tenant "held" keeps its turn until release is closed; any other tenant's
// read answers once it has a turn.
type heldReader struct {
	turns   chan struct{}
	release chan struct{}
	running atomic.Int64 // reads of "held" holding a turn
}

func newHeldReader() *heldReader {
	return &heldReader{turns: make(chan struct{}, replay.MaxConcurrentReads), release: make(chan struct{})}
}

func (h *heldReader) History(ctx context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	select {
	case h.turns <- struct{}{}:
		defer func() { <-h.turns }()
	case <-ctx.Done():
		return substate.HistoryPage{}, substate.WrapError(substate.EUNAVAILABLE, ctx.Err(), "no turn")
	}
	if q.TenantID == "held" {
		h.running.Add(1)
		defer h.running.Add(-1)
		<-h.release
	}
	return substate.HistoryPage{TenantID: q.TenantID, Transitions: []substate.Transition{}}, nil
}

// TestHistoryReadsBoundedPerCaller: history reads were bounded only in
// all (16 at once), so one caller sending more than that held every turn
// and the reads of every other caller waited until its were done. Now a
// caller (a key, or the address of the anonymous loopback caller) holds
// at most MaxHistoryReadsPerCaller of them; its other reads wait for its
// own turns, and another caller's read is answered meanwhile.
func TestHistoryReadsBoundedPerCaller(t *testing.T) {
	flood := 2 * replay.MaxConcurrentReads
	t.Run("Keys", func(t *testing.T) {
		keys := keyFile(t, keyLine("flood", "read", "*", "key-flood"), keyLine("other", "read", "*", "key-other"))
		a, err := httpapi.NewAuthorizer("0.0.0.0:0", keys)
		if err != nil {
			t.Fatal(err)
		}
		h := newHeldReader()
		var arrived atomic.Int64
		s := &httpapi.Server{Addr: "127.0.0.1:0", History: h, Auth: a}
		handler := s.Handler()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived.Add(1)
			handler.ServeHTTP(w, r)
		}))
		defer srv.Close()
		read := func(tenant, key string) int {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/tenants/"+tenant+"/history", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		checkNotStarved(t, h, flood, &arrived,
			func() int { return read("held", "key-flood") },
			func() int { return read("other", "key-other") })
	})
	t.Run("LoopbackAddresses", func(t *testing.T) {
		h := newHeldReader()
		s := &httpapi.Server{Addr: "127.0.0.1:0", History: h} // no keys: the anonymous loopback caller
		handler := s.Handler()
		var arrived atomic.Int64
		read := func(tenant, from string) int {
			arrived.Add(1)
			req := httptest.NewRequest(http.MethodGet, "/v1/tenants/"+tenant+"/history", nil)
			req.Host, req.RemoteAddr = "localhost", from
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			return rec.Code
		}
		checkNotStarved(t, h, flood, &arrived,
			func() int { return read("held", "127.0.0.2:40000") },
			func() int { return read("other", "127.0.0.1:40001") })
	})
}

// checkNotStarved sends n reads with flood, each held by h until the end,
// and checks that no more than MaxHistoryReadsPerCaller of them run at
// once and that a read with other is answered 200 meanwhile; once h
// releases, every flood read answers 200 too.
func checkNotStarved(t *testing.T, h *heldReader, n int, arrived *atomic.Int64, flood, other func() int) {
	t.Helper()
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); statuses <- flood() }()
	}
	released := false
	release := func() {
		if !released {
			close(h.release)
			released = true
		}
	}
	defer func() { release(); wg.Wait() }()
	// Every flood read is in; give those that wrongly got a turn time to
	// start before looking.
	for deadline := time.Now().Add(10 * time.Second); arrived.Load() < int64(n) || h.running.Load() < httpapi.MaxHistoryReadsPerCaller; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d flood reads in, %d running", arrived.Load(), n, h.running.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := h.running.Load(); got > httpapi.MaxHistoryReadsPerCaller {
		t.Errorf("one caller runs %d history reads at once, want at most %d", got, httpapi.MaxHistoryReadsPerCaller)
	}

	answered := make(chan int, 1)
	go func() { answered <- other() }()
	select {
	case status := <-answered:
		if status != http.StatusOK {
			t.Errorf("another caller's read while one floods: %d, want 200", status)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("another caller's read waited 10 s while one caller held %d of the %d turns", h.running.Load(), replay.MaxConcurrentReads)
	}

	release()
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != n {
		t.Errorf("flood reads once released: %v, want %d answered 200 (they wait their turn)", counts, n)
	}
}
