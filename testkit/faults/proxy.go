package faults

import (
	"net"
	"sync"
	"testing"
)

// Proxy relays TCP connections to a server and can freeze them: while
// frozen it carries no byte either way, yet keeps every connection open,
// as a server that stopped (SIGSTOP, a paused VM) or a network that drops
// packets looks to a client. New connections are accepted and wait too.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
	conns  []net.Conn
}

// NewProxy relays connections to target (host:port) from a loopback port
// of its own until the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.thawed = sync.NewCond(&p.mu)
	go p.serve()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops carrying bytes; connections stay open.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw carries bytes again, those held meanwhile first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	p.thawed.Broadcast()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.relay(c, up)
		go p.relay(up, c)
	}
}

// relay copies src to dst, holding what it read while the proxy is
// frozen.
func (p *Proxy) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: close the other side too
		}
	}
}

// wait returns once the proxy is not frozen.
func (p *Proxy) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen {
		p.thawed.Wait()
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Thaw()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
