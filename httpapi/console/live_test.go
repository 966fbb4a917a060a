package console

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

func change(seq uint64, tenant string) substate.Change {
	return substate.Change{Seq: seq, TenantID: tenant, New: substate.TenantView{TenantID: tenant, WorkflowSubState: substate.StateRunning}}
}

func TestHub(t *testing.T) {
	t.Run("DropsSlowClient", func(t *testing.T) {
		h := newHub(16, 2)
		slow, _, _ := h.subscribe(0, false)
		fast, _, _ := h.subscribe(0, false)
		for i := uint64(1); i <= 10; i++ {
			h.publish(change(i, "t")) // never blocks, whatever slow does
			if ev := <-fast.ch; ev.seq != i {
				t.Fatalf("fast client got %d, want %d", ev.seq, i)
			}
		}
		n := 0
		for range slow.ch {
			n++
		}
		if n != 2 || !slow.dropped {
			t.Fatalf("slow client got %d changes, dropped %v; want 2 then dropped", n, slow.dropped)
		}
		if open, dropped := h.stats(); open != 1 || dropped != 1 {
			t.Fatalf("open %d dropped %d", open, dropped)
		}
		h.close()
	})
	t.Run("Resume", func(t *testing.T) {
		h := newHub(3, 8)
		for i := uint64(1); i <= 5; i++ {
			h.publish(change(i, "t"))
		}
		for _, tc := range []struct {
			last      uint64
			want      []uint64
			resumable bool
		}{
			{last: 4, want: []uint64{5}, resumable: true},
			{last: 2, want: []uint64{3, 4, 5}, resumable: true},
			{last: 1, want: []uint64{3, 4, 5}, resumable: false}, // 2 is no longer kept
			{last: 5, want: nil, resumable: true},
			{last: 9, want: nil, resumable: true}, // a newer page than this console: nothing missed
		} {
			c, missed, ok := h.subscribe(tc.last, true)
			var got []uint64
			for _, ev := range missed {
				got = append(got, ev.seq)
			}
			if ok != tc.resumable || !slices.Equal(got, tc.want) {
				t.Errorf("after %d: missed %v resumable %v, want %v %v", tc.last, got, ok, tc.want, tc.resumable)
			}
			h.unsubscribe(c)
		}
	})
	t.Run("ResumeAcrossGaps", func(t *testing.T) {
		// Events that change nothing leave gaps between changes: a page
		// that saw 10 missed nothing between 10 and 20, although the
		// oldest change kept is 20.
		h := newHub(2, 8)
		for _, seq := range []uint64{10, 20, 30} {
			h.publish(change(seq, "t"))
		}
		for _, tc := range []struct {
			last      uint64
			want      []uint64
			resumable bool
		}{
			{last: 10, want: []uint64{20, 30}, resumable: true},
			{last: 25, want: []uint64{30}, resumable: true},
			{last: 9, want: []uint64{20, 30}, resumable: false}, // 10 is no longer kept
		} {
			c, missed, ok := h.subscribe(tc.last, true)
			var got []uint64
			for _, ev := range missed {
				got = append(got, ev.seq)
			}
			if ok != tc.resumable || !slices.Equal(got, tc.want) {
				t.Errorf("after %d: missed %v resumable %v, want %v %v", tc.last, got, ok, tc.want, tc.resumable)
			}
			h.unsubscribe(c)
		}
	})
	t.Run("ResumeOnFreshHub", func(t *testing.T) {
		// A page of a worker that restarted: this hub cannot tell what
		// changed before it subscribed, so the page reloads.
		h := newHub(8, 8)
		if c, _, ok := h.subscribe(40, true); ok {
			t.Error("a hub that has seen no change let a page resume from 40")
		} else {
			h.unsubscribe(c)
		}
		h.publish(change(45, "t"))
		if c, _, ok := h.subscribe(40, true); ok {
			t.Error("a hub whose first change is 45 let a page resume from 40")
		} else {
			h.unsubscribe(c)
		}
		if c, missed, ok := h.subscribe(44, true); !ok || len(missed) != 1 || missed[0].seq != 45 {
			t.Errorf("from 44: missed %d, resumable %v; want 45, resumable", len(missed), ok)
		} else {
			h.unsubscribe(c)
		}
	})
	t.Run("SkipsDuplicates", func(t *testing.T) {
		h := newHub(8, 8)
		c, _, _ := h.subscribe(0, false)
		for _, seq := range []uint64{3, 3, 2, 4} {
			h.publish(change(seq, "t"))
		}
		h.close()
		var got []uint64
		for ev := range c.ch {
			got = append(got, ev.seq)
		}
		if len(got) != 2 || got[0] != 3 || got[1] != 4 {
			t.Fatalf("got %v, want [3 4]", got)
		}
	})
}

// sseEvents reads SSE events from an open stream until it has n of them.
func sseEvents(t *testing.T, resp *http.Response, n int) []map[string]string {
	t.Helper()
	var out []map[string]string
	sc := bufio.NewScanner(resp.Body)
	cur := map[string]string{}
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(cur) > 0 && cur["event"] != "" {
				out = append(out, cur)
			}
			cur = map[string]string{}
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, ":") {
			cur[k] = v
		}
	}
	return out
}

func TestChangesStream(t *testing.T) {
	key := "k-0123456789abcdef0123456789abcdef"
	sum := sha256.Sum256([]byte(key))
	keys := &httpapi.Keys{Text: "ops read acme- sha256:" + hex.EncodeToString(sum[:])}
	if err := keys.Load(); err != nil {
		t.Fatal(err)
	}
	c := &Console{}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c, Auth: &httpapi.Authorizer{Keys: keys}}).Handler())
	defer srv.Close()
	for i, tenant := range []string{"acme-1", "globex-1", "acme-2", "acme-3"} {
		c.hub.publish(change(uint64(i+1), tenant))
	}
	open := func(t *testing.T, lastID string, auth func(*http.Request)) *http.Response {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/api/changes", nil)
		if lastID != "" {
			req.Header.Set(substate.HeaderLastEventID, lastID)
		}
		auth(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
	t.Run("ErrUnauthorized", func(t *testing.T) {
		if resp := open(t, "", func(*http.Request) {}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("ResumeWithinPrefix", func(t *testing.T) {
		resp := open(t, "1", bearer)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		evs := sseEvents(t, resp, 2) // globex-1 (seq 2) is outside the key's prefix
		if len(evs) != 2 || evs[0]["id"] != "3" || evs[1]["id"] != "4" || !strings.Contains(evs[0]["data"], `"acme-2"`) {
			t.Fatalf("events %v", evs)
		}
		c.hub.publish(change(5, "acme-4"))
		if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["id"] != "5" {
			t.Fatalf("live event %v", evs)
		}
	})
	t.Run("KeyFromCookie", func(t *testing.T) {
		resp := open(t, "4", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: httpapi.KeyCookie, Value: key}) })
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["id"] != "5" {
			t.Fatalf("events %v", evs)
		}
	})
	t.Run("ResetWhenTooOld", func(t *testing.T) {
		for i := uint64(6); i < 6+DefaultResume; i++ {
			c.hub.publish(change(i, "acme-x"))
		}
		resp := open(t, "1", bearer)
		if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["event"] != "reset" {
			t.Fatalf("events %v", evs)
		}
	})
	t.Run("RequeueNeedsAdmin", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/api/deadletters/1/requeue", nil)
		bearer(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", resp.StatusCode)
		}
	})
}

// TestLoopbackWithoutKeys: on a worker on loopback without keys, a
// request without a key reads as the anonymous read:raw principal, an
// unknown key is refused, and a requeue (admin) is not anonymous.
func TestLoopbackWithoutKeys(t *testing.T) {
	c := &Console{}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c, Auth: &httpapi.Authorizer{AllowAnonymous: true}}).Handler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{http.MethodGet, "/console/api/overview", "", http.StatusOK},
		{http.MethodGet, "/console/api/overview", "not-a-key", http.StatusUnauthorized},
		{http.MethodPost, "/console/api/deadletters/1/requeue", "", http.StatusForbidden},
		{http.MethodGet, "/", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s (key %q): %d, want %d", tc.method, tc.path, tc.key, resp.StatusCode, tc.want)
		}
	}
}

// BenchmarkHubPublish is the cost of one change-feed message to the
// console, read and formatted, with a full resume ring and no page open.
func BenchmarkHubPublish(b *testing.B) {
	h := newHub(DefaultResume, DefaultClientBuffer)
	ch := change(1, "acme-1")
	ch.Old = ch.New
	ch.New.WorkflowErrorMessage, ch.New.UpdatedAt = "States.TaskFailed: the task failed", time.Now()
	body, err := substate.MarshalChangeEvent(ch, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		lc, err := decodeChange(body)
		if err != nil {
			b.Fatal(err)
		}
		lc.seq = uint64(i + 1)
		h.add(lc, false)
	}
}

// TestStreamLimits: open streams are capped, and a page that stops
// reading is closed once a write has waited streamWriteTimeout, instead of
// holding its connection and goroutine for good.
func TestStreamLimits(t *testing.T) {
	defer func(d time.Duration) { streamWriteTimeout = d }(streamWriteTimeout)
	streamWriteTimeout = 200 * time.Millisecond
	c := &Console{MaxStreams: 1, ClientBuffer: 1 << 16}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c}).Handler())
	defer srv.Close()

	// A client that sends its request and never reads.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := conn.Write([]byte("GET /console/api/changes HTTP/1.1\r\nHost: console\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(c.streams) == 1 })

	resp, err := http.Get(srv.URL + "/console/api/changes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second stream over a cap of 1: %d, want 503", resp.StatusCode)
	}

	long := strings.Repeat("x", 8<<10)
	for i := uint64(1); i <= 8000; i++ {
		ch := change(i, "acme-1")
		ch.New.WorkflowErrorMessage = long
		c.hub.publish(ch)
	}
	waitFor(t, func() bool { return len(c.streams) == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waited 10s")
		}
	}
}

// TestResumingPageNotReading: a page that comes back with Last-Event-ID
// and reads nothing of what it missed is closed once that write has waited
// streamWriteTimeout, and its place under MaxStreams is free again.
func TestResumingPageNotReading(t *testing.T) {
	defer func(d time.Duration) { streamWriteTimeout = d }(streamWriteTimeout)
	streamWriteTimeout = 200 * time.Millisecond
	c := &Console{MaxStreams: 1, Resume: 2000}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c}).Handler())
	defer srv.Close()
	long := strings.Repeat("x", 8<<10)
	for i := uint64(1); i <= 2000; i++ { // 16 MiB kept for resume
		ch := change(i, "acme-1")
		ch.New.WorkflowErrorMessage = long
		c.hub.publish(ch)
	}

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := conn.Write([]byte("GET /console/api/changes HTTP/1.1\r\nHost: console\r\nLast-Event-ID: 0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(c.streams) == 1 })
	waitFor(t, func() bool { return len(c.streams) == 0 })
}

// TestStreamsEndOnServerClose: closing the server that serves the console
// ends its open streams, so Close does not wait for them until its own
// timeout, and fail then.
func TestStreamsEndOnServerClose(t *testing.T) {
	c := &Console{}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &httpapi.Server{Addr: "127.0.0.1:0", Console: c}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL() + "/console/api/changes")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("changes stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("close with a console stream open: %v", err)
	}
}

// TestHubGap: a change that may follow dropped ones (gap) leaves no page
// resumable from it; the first change without a gap is resumable again.
func TestHubGap(t *testing.T) {
	h := newHub(16, 16)
	h.publish(change(1, "t"))
	h.lost()
	for _, tc := range []struct {
		seq       uint64
		gap       bool
		lastID    uint64
		resumable bool
		after     string
	}{
		{2, true, 1, false, "a change NATS may have dropped changes after"},
		{3, true, 2, false, "the last change queued at the drop"},
		{4, false, 3, true, "the first change after the drop"},
		{5, false, 2, false, "a page that last saw a change of the window"},
	} {
		h.add(live(change(tc.seq, "t")), tc.gap)
		cl, _, resumable := h.subscribe(tc.lastID, true)
		h.unsubscribe(cl)
		if resumable != tc.resumable {
			t.Errorf("after %s, resume from %d: resumable %v, want %v", tc.after, tc.lastID, resumable, tc.resumable)
		}
	}
}
