package httpapi

import (
	"net"
	"net/http"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/internal/netx"
)

// hostAllowList is the set of names a request's Host may carry, with any
// port: localhost, the listen host and the names configured
// (Server.AllowedHosts). An IP address is always allowed.
//
// A browser sends the name of the page's own address as Host. A page
// served as evil.example whose name the attacker later resolves to
// 127.0.0.1 (DNS rebinding) is the same origin as the worker on loopback
// to the browser, so it could read what a loopback worker without keys
// lets anyone read and post what it lets anyone post; its requests still
// carry Host: evil.example, which only this check refuses. Programs on the
// machine send the address they dialled (127.0.0.1:8080, localhost:8080).
// A Host that is an IP address is never a rebinding: the browser connects
// to the address it names. So probes and scrapers that address the worker
// by its IP need no name configured.
type hostAllowList map[string]bool

// newHostAllowList returns the allow-list of a server listening on addr
// with the extra names, or nil when Host is not checked: on an address
// beyond loopback where no name is configured, every route needs a
// credential a page cannot have.
func newHostAllowList(addr string, names []string) hostAllowList {
	if !netx.Loopback(addr) && len(names) == 0 {
		return nil
	}
	l := hostAllowList{"localhost": true}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		l[hostName(host)] = true
	}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			l[hostName(n)] = true
		}
	}
	return l
}

// hostName is a Host header's or a configured name's host, without its
// port, brackets, a final dot or case.
func hostName(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// allows reports whether a request's Host is one the server answers to.
// A request without one (HTTP/1.0) is not a browser's.
func (l hostAllowList) allows(host string) bool {
	if l == nil || host == "" {
		return true
	}
	name := hostName(host)
	if l[name] {
		return true
	}
	return net.ParseIP(name) != nil
}

// checkHost refuses, with 403 and the JSON error, a request whose Host is
// not on the server's allow-list.
func (s *Server) checkHost(next http.Handler) http.Handler {
	l := newHostAllowList(s.Addr, s.AllowedHosts)
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.allows(r.Host) {
			httpx.DropBody(w)
			httpx.Error(w, r, substate.Errorf(substate.EFORBIDDEN,
				"Host %s is not a name this worker answers to: only localhost, an IP address and the names of --http-allowed-hosts are (a web page that resolves its own name to this machine is refused; name a proxy's host with --http-allowed-hosts)",
				substate.QuotePrefix(r.Host, 100)), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}
