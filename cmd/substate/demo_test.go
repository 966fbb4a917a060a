package main

import (
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs its workflows in real time")
	}
	code, out, errOut := runCLI(t, "demo", "--tenants", "4", "--data-dir", t.TempDir(),
		"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"backing-off", "→ succeeded", "→ failed", // moved through these live
		"Every tenant settled as expected", "succeeded 3  failed 4",
		"card declined", // the real error, not a fixed sentence
		"cancelled",     // the killed Restate invocation
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
