package httpapi_test

import (
	"net"
	"testing"

	"github.com/substatehq/substate/httpapi"
)

// TestClientKey: the connection cap (a net.Addr) and the per-caller turns
// (a request's RemoteAddr) key one client alike: an IPv4 address without
// its port, an IPv6 address's /64, and an address without an IP as it is.
func TestClientKey(t *testing.T) {
	tests := []struct {
		name string
		addr net.Addr
		want string
	}{
		{"IPv4", &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 41000}, "192.0.2.7"},
		{"IPv4InIPv6", &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 41000}, "192.0.2.7"},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 41000}, "2001:db8:1:2::/64"},
		{"NoIP", &net.TCPAddr{Port: 41000}, ":41000"},
		{"Unix", &net.UnixAddr{Name: "/run/substate.sock", Net: "unix"}, "/run/substate.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpapi.ClientKey(tt.addr); got != tt.want {
				t.Errorf("ClientKey(%v) = %q, want %q", tt.addr, got, tt.want)
			}
			if got := httpapi.RemoteKey(tt.addr.String()); got != tt.want {
				t.Errorf("RemoteKey(%q) = %q, want %q, as ClientKey", tt.addr.String(), got, tt.want)
			}
		})
	}
}
