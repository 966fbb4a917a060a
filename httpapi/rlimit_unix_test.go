//go:build unix

package httpapi_test

import (
	"syscall"
	"testing"
)

// raiseFileLimit raises the process's open-file limit to at least n, as
// far as the hard limit allows, and skips the test when that is too low.
func raiseFileLimit(tb testing.TB, n uint64) {
	tb.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
	if rl.Cur >= n {
		return
	}
	if rl.Max < n {
		tb.Skipf("the open-file limit is %d, the test needs %d", rl.Max, n)
	}
	old := rl.Cur
	rl.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		rl.Cur = old
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	})
}
