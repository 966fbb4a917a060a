package cputime_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/cputime"
)

// The process's CPU time grows with work done, by at least the time a
// busy loop spent on the CPU (part of it, on a loaded machine).
func TestProcessGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no getrusage")
	}
	before := cputime.Process()
	if before <= 0 {
		t.Fatalf("CPU time so far %v, want > 0", before)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; x++ {
	}
	if d := cputime.Process() - before; d <= 0 {
		t.Fatalf("50 ms of busy loop (%d turns) added %v of CPU time, want > 0", x, d)
	}
}
