package httpapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// openLimited serves with the given limits a body-reading ingest route
// (POST /v1/ingest/eventbridge), a slow route (GET /metrics) and a slow
// streaming route (GET /console/api/changes).
func openLimited(tb testing.TB, lim httpapi.Limits) *httpapi.Server {
	tb.Helper()
	slow := func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(3 * lim.WriteTimeout)
		_, _ = io.WriteString(w, "late\n")
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // the read deadline passed: the server closes the connection
		}
		_, _ = w.Write(b)
	})
	s := &httpapi.Server{Addr: "127.0.0.1:0", Limits: lim, Ingest: ingesters{substate.ProviderStepFunctions: echo},
		Metrics: http.HandlerFunc(slow), Console: console{Changes: http.HandlerFunc(slow)}}
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// console is an operator console made of its handlers.
type console httpapi.ConsoleHandlers

func (c console) Handlers() httpapi.ConsoleHandlers { return httpapi.ConsoleHandlers(c) }

func dialServer(tb testing.TB, s *httpapi.Server) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reads c until the server closes it; it fails when the
// connection is still open after ten seconds, far beyond the timeouts.
func closedByServer(tb testing.TB, c net.Conn) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tb.Fatal("the server kept the connection open")
	}
}

func TestSlowClientsAreClosed(t *testing.T) {
	lim := httpapi.Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond}
	s := openLimited(t, lim)
	t.Run("SlowHeaders", func(t *testing.T) {
		c := dialServer(t, s)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		closedByServer(t, c)
	})
	t.Run("SlowBody", func(t *testing.T) {
		c := dialServer(t, s)
		_, _ = io.WriteString(c, "POST /v1/ingest/eventbridge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{\"a\":")
		closedByServer(t, c)
	})
	t.Run("Idle", func(t *testing.T) {
		c := dialServer(t, s)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("first request: %v", err)
		}
		resp.Body.Close()
		closedByServer(t, c)
	})
	t.Run("SlowResponseCut", func(t *testing.T) {
		resp, err := http.Get(s.URL() + "/metrics")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatal("a response written after the write timeout arrived whole")
		}
	})
	t.Run("StreamingRouteHasNoWriteTimeout", func(t *testing.T) {
		resp, err := http.Get(s.URL() + "/console/api/changes")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "late\n" {
			t.Fatalf("streamed %q, %v", b, err)
		}
	})
}

// Connections above the cap are answered 503 with the JSON error at once,
// and served again once the others are gone.
func TestConnectionCap(t *testing.T) {
	s := openLimited(t, httpapi.Limits{MaxConns: 5, ReadHeaderTimeout: time.Minute})
	var held []net.Conn
	for range 5 {
		c := dialServer(t, s)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\n") // never finished
		held = append(held, c)
	}
	c := dialServer(t, s)
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Error struct{ Code string } }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 503 || body.Error.Code != substate.EUNAVAILABLE || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %q, Retry-After %q", resp.StatusCode, body.Error.Code, resp.Header.Get("Retry-After"))
	}
	for _, c := range held {
		c.Close()
	}
	eventuallyOK(t, s.URL()+"/healthz")
}

// Three thousand clients that never finish their request do not keep a
// normal request from being served.
func TestSlowClientFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 6,000 sockets")
	}
	const slow = 3000
	raiseFileLimit(t, 2*slow+256)
	s := openLimited(t, httpapi.Limits{ReadHeaderTimeout: time.Minute})
	addr := strings.TrimPrefix(s.URL(), "http://")
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("slow client %d: %v", i, err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST /v1/ingest/eventbridge HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(s.URL() + "/healthz")
	if err != nil {
		t.Fatalf("normal request beside %d slow clients: %v", slow, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("normal request: %d", resp.StatusCode)
	}
}

func eventuallyOK(tb testing.TB, url string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s never answered 200: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
