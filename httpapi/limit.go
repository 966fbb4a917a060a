package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// Why a connection is over a cap: the server's, or its client's.
const (
	overloaded = "too many connections; retry later"
	crowded    = "too many connections from your address (at most %d at once); retry later, or reuse fewer connections"
)

// refusal is a complete HTTP/1.1 503 with the JSON error body msg.
func refusal(msg string) []byte {
	body := `{"error":{"code":"unavailable","message":"` + msg + `"}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// fdReserve is how many open files the connection cap leaves to the rest
// of the process: the NATS server and its clients, bbolt, logs.
const fdReserve = 256

// healthWait is how long a connection over a cap may take to ask for
// /healthz or /readyz and be answered.
const healthWait = 2 * time.Second

// capConns returns the connection cap for a wanted one and the process's
// open-file limit: never so high that connections alone exhaust the
// limit, when it is known, and never below 16.
func capConns(want int, fdLimit uint64, known bool) int {
	if !known || fdLimit > uint64(want)+fdReserve {
		return want
	}
	return max(int(fdLimit)-fdReserve, 16)
}

// limitListener caps the connections open at once, in all and per client
// address, and keeps a few connections beyond the caps for health probes.
//
// A connection within both caps is served. One above either is given one
// of the health connections, while one is free: it may ask for /healthz
// or /readyz within healthWait and is answered, and any other request on
// it is answered 503 (healthOnly). With none free, it is answered 503 with
// the JSON error body at once and closed, so a client learns to retry
// instead of waiting in the kernel's backlog, and the process never runs
// out of file descriptors (which makes every accept fail, for
// well-behaved clients too). So a flood of slow clients from one address
// takes at most its share of the connections, and liveness and readiness
// probes are answered however many connections a flood holds.
//
// golang.org/x/net/netutil.LimitListener makes the excess wait instead:
// under a flood of slow clients a normal request would queue behind them
// with no answer, which is what this listener is for.
type limitListener struct {
	net.Listener
	max       int // in all; 0 for no cap
	perClient int // per client address; 0 for no cap
	health    int // health connections beyond the caps
	// refuseTimeout bounds how long writing the 503 may take.
	refuseTimeout time.Duration

	mu      sync.Mutex
	open    int
	clients map[string]int
	probes  int // health connections open
}

// newLimitListener returns l with at most n connections open at once, at
// most perClient of one client address, and health connections beyond
// them; a bound of 0 or less is none.
func newLimitListener(l net.Listener, n, perClient, health int) *limitListener {
	return &limitListener{Listener: l, max: max(n, 0), perClient: max(perClient, 0), health: max(health, 0),
		refuseTimeout: 100 * time.Millisecond, clients: map[string]int{}}
}

// Accept returns the next connection within the caps, or a health
// connection; the others are answered and closed here.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		conn, why := l.admit(c)
		if conn != nil {
			return conn, nil
		}
		l.refuse(c, why)
	}
}

// admit returns c as a connection within the caps or as a health
// connection, or nil and why it is refused.
func (l *limitListener) admit(c net.Conn) (net.Conn, string) {
	key := clientKey(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	why := ""
	switch {
	case l.max > 0 && l.open >= l.max:
		why = overloaded
	case l.perClient > 0 && l.clients[key] >= l.perClient:
		why = fmt.Sprintf(crowded, l.perClient)
	default:
		l.open++
		l.clients[key]++
		return &limitedConn{Conn: c, release: func() { l.release(key) }}, ""
	}
	if l.probes >= l.health {
		return nil, why
	}
	l.probes++
	until := time.Now().Add(healthWait)
	return &healthConn{limitedConn: limitedConn{Conn: c, release: l.releaseProbe}, until: until, why: why}, ""
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.clients[key]--; l.clients[key] <= 0 {
		delete(l.clients, key)
	}
}

func (l *limitListener) releaseProbe() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probes--
}

// refuse answers c with the 503 and closes it, without reading its
// request: the client may see a reset after the answer, never a hang. The
// answer fits the new socket's empty send buffer, so the write does not
// wait; the deadline only bounds a pathological one.
func (l *limitListener) refuse(c net.Conn, why string) {
	_ = c.SetWriteDeadline(time.Now().Add(l.refuseTimeout))
	_, _ = c.Write(refusal(why))
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.Close()
}

// clientKey is the address a per-client cap counts by: an IPv4 address,
// or an IPv6 address's /64, which one client usually holds whole.
func clientKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP != nil {
		return ipKey(ta.IP)
	}
	return remoteKey(a.String())
}

// remoteKey is clientKey of an address as host:port, as an http.Request's
// RemoteAddr holds it; the address itself when it holds no IP.
func remoteKey(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		if ip := net.ParseIP(host); ip != nil {
			return ipKey(ip)
		}
	}
	return hostport
}

// ipKey is the key of ip: itself for IPv4, its /64 for IPv6.
func ipKey(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// healthConn is a connection beyond the caps: it lives until at most, so
// every deadline the server sets on it is cut there, and it is served
// health probes only (why says why others are refused).
type healthConn struct {
	limitedConn
	until time.Time
	why   string
}

func (c *healthConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.cut(t)) }

func (c *healthConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cut(t)) }

func (c *healthConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cut(t)) }

// cut returns t, or until when t is later or none.
func (c *healthConn) cut(t time.Time) time.Time {
	if t.IsZero() || t.After(c.until) {
		return c.until
	}
	return t
}

type healthOnlyKey struct{}

// connContext marks the requests of a health connection on their
// context, for healthOnly.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if hc, ok := c.(*healthConn); ok {
		return context.WithValue(ctx, healthOnlyKey{}, hc.why)
	}
	return ctx
}

// healthOnly answers a request on a health connection (one beyond the
// connection caps) only when it asks for /healthz or /readyz; any other
// is 503 with Retry-After, as the connection itself would have been.
func healthOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why, ok := r.Context().Value(healthOnlyKey{}).(string)
		if ok && !isHealth(r) {
			httpx.DropBody(w)
			httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE, "%s", why), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isHealth reports whether r asks for liveness or readiness.
func isHealth(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}
