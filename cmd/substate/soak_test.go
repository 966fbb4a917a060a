package main

import (
	"strings"
	"testing"
	"time"
)

// The soak command's code path with a few cycles: the worker (this test
// binary re-executed, see TestMain) is killed with SIGKILL under load and
// restarted; every acknowledged event is in the view and verify finds it
// equal to the stream. `substate soak` runs 200 cycles by default; the
// figures are in docs/faults.md.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	code, out, errOut := runCLIFor(t, 5*time.Minute, "soak", "--cycles", "3", "--tenants", "30", "--clients", "4",
		"--min-up", "200ms", "--max-up", "600ms", "--data-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("soak: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"kill -9 cycles          3", "lost                    0 of 30 tenants", "verify                  equal"} {
		if !strings.Contains(out, want) {
			t.Fatalf("soak output lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	if strings.Contains(out, "events acknowledged     0 ") {
		t.Fatalf("no load reached the worker:\n%s", out)
	}
}
