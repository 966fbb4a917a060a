package httpapi

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// overloadBody is the answer to a connection above the limit.
const overloadBody = `{"error":{"code":"unavailable","message":"too many connections; retry later"}}` + "\n"

// overloadResponse is a complete HTTP/1.1 503 with the JSON error body.
var overloadResponse = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(overloadBody)) + "\r\n\r\n" + overloadBody)

// fdReserve is how many open files the connection cap leaves to the rest
// of the process: the NATS server and its clients, bbolt, logs.
const fdReserve = 256

// capConns returns the connection cap for a wanted one and the process's
// open-file limit: never so high that connections alone exhaust the
// limit, when it is known, and never below 16.
func capConns(want int, fdLimit uint64, known bool) int {
	if !known || fdLimit > uint64(want)+fdReserve {
		return want
	}
	return max(int(fdLimit)-fdReserve, 16)
}

// limitListener caps the connections open at once. A connection above the
// cap is accepted, answered 503 with the JSON error body at once and
// closed, so a client learns to retry instead of waiting in the kernel's
// backlog, and the process never runs out of file descriptors (which makes
// every accept fail, for well-behaved clients too).
//
// golang.org/x/net/netutil.LimitListener makes the excess wait instead:
// under a flood of slow clients a normal request would queue behind them
// with no answer, which is what this listener is for.
type limitListener struct {
	net.Listener
	slots chan struct{}
	// refuseTimeout bounds how long writing the 503 may take.
	refuseTimeout time.Duration
}

// newLimitListener returns l with at most n connections open at once.
func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), refuseTimeout: 100 * time.Millisecond}
}

// Accept returns the next connection within the limit; those above it are
// answered and closed here.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			l.refuse(c)
		}
	}
}

// refuse answers c with the 503 and closes it, without reading its
// request: the client may see a reset after the answer, never a hang. The
// answer fits the new socket's empty send buffer, so the write does not
// wait; the deadline only bounds a pathological one.
func (l *limitListener) refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(l.refuseTimeout))
	_, _ = c.Write(overloadResponse)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.Close()
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
