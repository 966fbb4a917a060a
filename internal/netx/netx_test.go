package netx_test

import (
	"testing"

	"github.com/substatehq/substate/internal/netx"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:8080": true, "localhost:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "10.0.0.1:8080": false,
		"example.com:8080": false, "127.0.0.1": false, "": false,
	} {
		if got := netx.Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
