//go:build unix

package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestSlowClientFlood is the slow-client attack on "substate run" with
// ingest credentials: 5,000 connections from one address send the headers
// of an ingest without the credential and then their body at a byte a
// second. They used to hold every connection (the body was read before
// the key was looked at, and there was no per-client cap), so every
// request, /healthz and /readyz included, got 503. Now each is refused
// with 401 as soon as its headers are in; /healthz, /readyz and a real
// delivery from elsewhere are served throughout.
//
// The same address then floods with the key (a client that has it, or a
// loopback worker without keys): it holds at most its per-client share,
// its other connections are answered 503 naming the cap at once, probes
// are answered from its own address too, and a body that trickles is cut
// with 408. So is a body that stops halfway (BodyCut), with a JSON error.
//
// Outside CI a machine that cannot dial from 127.0.0.2 or open enough
// files skips the test; under SUBSTATE_CI=1 that fails it.
func TestSlowClientFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 5,000 connections")
	}
	const flood = 5000
	raiseFileLimit(t, 3*flood)
	const key = "ingest-key-0123456789"
	w := workertest.Start(t, func(f *worker.Flags) { f.IngestAPIKey = key })
	url := w.HTTP.URL()
	addr := strings.TrimPrefix(url, "http://")
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	head := func(apiKey string) string {
		return "POST /v1/ingest/eventbridge HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
			"X-Api-Key: " + apiKey + "\r\nContent-Length: 100000\r\n\r\n{"
	}

	// A delivery with the key whose body stops halfway, over a plain
	// connection from 127.0.0.1: it was answered 400 when the server's
	// whole-request deadline (30 s) cut it; now the ingest's own body
	// deadline cuts it with 408 and a JSON error, before that deadline.
	t.Run("BodyCut", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, head(key)+`"id":"ev-cut","detail-type":`); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * httpapi.DefaultReadTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a body cut halfway: %v", err)
		}
		defer resp.Body.Close()
		took := time.Since(start)
		var e struct {
			Error struct{ Code, Message string }
		}
		derr := json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusRequestTimeout || derr != nil || e.Error.Code != substate.ETIMEOUT || e.Error.Message == "" {
			t.Fatalf("body cut halfway: %d %s %+v (%v), want 408 with a JSON error coded %q", resp.StatusCode, resp.Header.Get("Content-Type"), e, derr, substate.ETIMEOUT)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("408 with Content-Type %q, want application/json", ct)
		}
		// Cut by the body deadline, not the whole request's: a behavioural
		// bound with the margin between the two (10 s and 30 s).
		if took < ingress.DefaultBodyTimeout/2 || took >= httpapi.DefaultReadTimeout {
			t.Errorf("body cut after %s, want about the body timeout of %s, before the server's %s", took, ingress.DefaultBodyTimeout, httpapi.DefaultReadTimeout)
		}
	})

	t.Run("WithoutCredentials", func(t *testing.T) {
		conns := open(t, attacker, addr, flood, head("wrong"))
		stop := trickle(conns)
		defer stop()
		checkServed(t, url, key)
		// Every attacker's request was answered 401, or its connection
		// refused 503 at once while it was one too many.
		for i, c := range conns[:100] {
			if status := answer(t, c); status != http.StatusUnauthorized && status != http.StatusServiceUnavailable {
				t.Fatalf("attacker connection %d: %d, want 401 (or 503 when over the cap)", i, status)
			}
		}
	})

	t.Run("WithCredentials", func(t *testing.T) {
		conns := open(t, attacker, addr, flood/2, head(key))
		stop := trickle(conns)
		defer stop()
		checkServed(t, url, key)
		workertest.Eventually(t, func() string {
			c, err := attacker.Dial("tcp", addr)
			if err != nil {
				return err.Error()
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			if status := answer(t, c); status != http.StatusOK {
				return fmt.Sprintf("/healthz from the flooding address: %d", status)
			}
			return ""
		})
		// Those over the address's share were refused at once (503), the
		// others' trickling bodies are cut (408, not 400).
		statuses := answers(t, conns)
		if n, share := statuses[http.StatusRequestTimeout], worker.DefaultFlags().HTTPMaxConnsPerIP; n == 0 || n > share {
			t.Errorf("%d bodies cut with 408, want some and at most the address's share of %d: %v", n, share, statuses)
		}
		if statuses[http.StatusServiceUnavailable] == 0 || len(statuses) != 2 {
			t.Errorf("answers %v, want 408 and 503 only", statuses)
		}
	})
}

// open opens n connections with d to addr and sends head on each.
func open(tb testing.TB, d *net.Dialer, addr string, n int, head string) []net.Conn {
	tb.Helper()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			if i == 0 {
				skipOutsideCI(tb, "cannot dial from another loopback address: %v", err)
			}
			tb.Fatalf("connection %d: %v", i, err)
		}
		tb.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, head)
		conns = append(conns, c)
	}
	return conns
}

// trickle sends a byte a second on every connection until stop is called.
func trickle(conns []net.Conn) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, c := range conns {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = c.Write([]byte(" "))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// checkServed checks that /healthz, /readyz and a delivery with the key
// are served from 127.0.0.1.
func checkServed(tb testing.TB, url, key string) {
	tb.Helper()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := workertest.Get(tb, url+path); code != http.StatusOK {
			tb.Fatalf("GET %s during the flood: %d %s", path, code, body)
		}
	}
	workertest.IngestTenant(tb, url, fmt.Sprintf("during-flood-%d", time.Now().UnixNano()), key)
}

// answer reads the status of the answer on c, 0 when none came.
func answer(tb testing.TB, c net.Conn) int {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// answers reads the answer on every connection at once and counts them
// by status.
func answers(tb testing.TB, conns []net.Conn) map[int]int {
	tb.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[int]int{}
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status := answer(tb, c)
			mu.Lock()
			out[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// raiseFileLimit raises the process's open-file limit to at least n, as
// far as the hard limit allows, and skips the test when that is too low
// (fails it under SUBSTATE_CI=1).
func raiseFileLimit(tb testing.TB, n uint64) {
	tb.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
	if rl.Cur >= n {
		return
	}
	old := rl.Cur
	rl.Cur = min(n, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		rl.Cur = old
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	})
	if rl.Cur < n {
		skipOutsideCI(tb, "the open-file limit is %d (hard), the test needs %d", rl.Max, n)
	}
}

// skipOutsideCI skips the test for a reason of the machine's, or fails it
// under SUBSTATE_CI=1 (.ci/run), where the machine is meant to allow it.
func skipOutsideCI(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("SUBSTATE_CI") == "1" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}
