// Package netx answers the one network question substate's listeners ask
// before they start: does this address only accept local connections?
package netx

import "net"

// Loopback reports whether a listen address (host:port) only accepts
// connections from this machine: localhost or a loopback IP. An empty host
// (every interface) or an address without a port does not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

// LoopbackHost reports whether a listen host only accepts connections from
// this machine.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
