package httpapi_test

import (
	"testing"

	"github.com/substatehq/substate/httpapi"
)

func TestCapConns(t *testing.T) {
	for _, tc := range []struct {
		want  int
		fds   uint64
		known bool
		got   int
	}{
		{4096, 1 << 20, true, 4096},
		{4096, 0, false, 4096},
		{4096, 4096, true, 3840},
		{4096, 1024, true, 768},
		{4096, 100, true, 16},
		{100, 1024, true, 100},
	} {
		if got := httpapi.CapConns(tc.want, tc.fds, tc.known); got != tc.got {
			t.Errorf("capConns(%d, %d, %v) = %d, want %d", tc.want, tc.fds, tc.known, got, tc.got)
		}
	}
}
