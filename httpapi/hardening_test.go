package httpapi_test

import (
	"bufio"
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

// Connections above the cap may ask for /healthz and /readyz on the
// connections kept for health probes; anything else is answered 503 with
// the JSON error, at once without them. Once the others are gone, all is
// served again.
func TestConnectionCap(t *testing.T) {
	for _, tc := range []struct {
		name         string
		healthConns  int
		path         string
		want         int
		wantRetry    bool
		wantOverload string
	}{
		{"HealthOverCap", 0, "/healthz", 200, false, ""},
		{"ReadyOverCap", 0, "/readyz", 200, false, ""},
		{"OtherOverCap", 0, "/v1/openapi.json", 503, true, "too many connections"}, // served: 404 here
		{"HealthWithoutHealthConns", -1, "/healthz", 503, true, "too many connections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openLimited(t, httpapi.Limits{MaxConns: 5, HealthConns: tc.healthConns, ReadHeaderTimeout: time.Minute})
			var held []net.Conn
			for range 5 {
				c := dialServer(t, s)
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\n") // never finished
				held = append(held, c)
			}
			resp, body := rawGet(t, dialServer(t, s), tc.path)
			if resp.StatusCode != tc.want || (resp.Header.Get("Retry-After") != "") != tc.wantRetry || !strings.Contains(body, tc.wantOverload) {
				t.Fatalf("GET %s over the cap: %d %s, Retry-After %q", tc.path, resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			if tc.want == 503 && !strings.Contains(body, substate.EUNAVAILABLE) {
				t.Fatalf("not the JSON error: %s", body)
			}
			for _, c := range held {
				c.Close()
			}
			eventuallyServed(t, s.URL()+"/v1/openapi.json")
		})
	}
}

// rawGet sends GET path on c and returns the answer.
func rawGet(tb testing.TB, c net.Conn, path string) (*http.Response, string) {
	tb.Helper()
	_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// dialFrom dials the server from a local address of the loopback network
// other than 127.0.0.1: another client. It skips the test where the
// system does not route 127.0.0.0/8 to loopback (Linux does).
func dialFrom(tb testing.TB, s *httpapi.Server, local string) net.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		tb.Skipf("cannot dial from %s: %v", local, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// One client address holds at most its share of the connections: above
// it, its connections are served health probes only, while another
// client's are served as before. A connection kept for a probe that asks
// nothing is closed within seconds.
func TestConnectionCapPerClient(t *testing.T) {
	s := openLimited(t, httpapi.Limits{MaxConnsPerClient: 3, ReadHeaderTimeout: time.Minute})
	for range 3 {
		c := dialServer(t, s)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\n") // never finished
	}
	resp, body := rawGet(t, dialServer(t, s), "/v1/openapi.json")
	if resp.StatusCode != 503 || !strings.Contains(body, "from your address (at most 3 at once)") {
		t.Fatalf("a fourth connection of the same client: %d %s, want 503 naming the per-client cap", resp.StatusCode, body)
	}
	if resp, body := rawGet(t, dialServer(t, s), "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("a probe from the same client: %d %s", resp.StatusCode, body)
	}
	if resp, body := rawGet(t, dialFrom(t, s, "127.0.0.2"), "/v1/openapi.json"); resp.StatusCode != 404 {
		t.Fatalf("another client: %d %s, want served (404: this server has no documents)", resp.StatusCode, body)
	}
	idle := dialServer(t, s)
	closedByServer(t, idle)
}

// Three thousand clients that never finish their request do not keep a
// normal request from being served (the per-client cap, which would keep
// them to their share, is off: this is the server's cap).
func TestSlowClientFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 6,000 sockets")
	}
	const slow = 3000
	raiseFileLimit(t, 2*slow+256)
	s := openLimited(t, httpapi.Limits{ReadHeaderTimeout: time.Minute, MaxConnsPerClient: -1})
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

// eventuallyServed waits until a GET of url is served: answered by a
// route or the router, not refused 503.
func eventuallyServed(tb testing.TB, url string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s was never served: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
