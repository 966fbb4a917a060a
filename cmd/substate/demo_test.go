package main

import (
	"strings"
	"testing"
)

// TestDemo runs the demo twice on the same data: the second run must show
// the same story, not an already settled view with its provider events
// dropped as duplicates of the first run's.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs its workflows in real time")
	}
	dataDir := t.TempDir()
	for _, run := range []string{"First", "Again"} {
		t.Run(run, func(t *testing.T) {
			code, out, errOut := runCLI(t, "demo", "--tenants", "4", "--data-dir", dataDir,
				"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
			if code != 0 {
				t.Fatalf("demo exited %d\n%s\n%s", code, out, errOut)
			}
			for _, want := range []string{
				"→ running", "→ backing-off", "→ waiting", "→ error", "→ succeeded", "→ failed", // moved through these live
				"Every tenant settled as expected", "succeeded 3  failed 4",
				"card declined", // the real error, not a fixed sentence
				"cancelled",     // the killed Restate invocation
				"hooli", "stark", "wayne",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("demo output lacks %q:\n%s", want, out)
				}
			}
			for _, tenant := range []string{"hooli", "stark", "wayne"} {
				if !strings.Contains(out, tenant+strings.Repeat(" ", 22-len(tenant))+" running") {
					t.Errorf("%s never moved from running:\n%s", tenant, out)
				}
			}
		})
	}
}
