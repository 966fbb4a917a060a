package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestDemo runs the demo twice on the same data: the second run must show
// the same story, not an already settled view with its provider events
// dropped as duplicates of the first run's. The second run writes to a
// terminal, so the live status line runs too.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs its workflows in real time")
	}
	dataDir := t.TempDir()
	for _, run := range []struct {
		name string
		out  interface {
			io.Writer
			String() string
		}
	}{{"First", &syncBuffer{}}, {"AgainOnTerminal", &ttyBuffer{}}} {
		t.Run(run.name, func(t *testing.T) {
			var errBuf syncBuffer
			m := &Main{Stdout: run.out, Stderr: &errBuf}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code := m.Run(ctx, []string{"demo", "--tenants", "4", "--data-dir", dataDir,
				"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"})
			out, errOut := run.out.String(), errBuf.String()
			if code != 0 {
				t.Fatalf("demo exited %d\n%s\n%s", code, out, errOut)
			}
			for _, want := range []string{
				"→ running", "→ backing-off", "→ waiting", "→ error", "→ succeeded", "→ failed", // moved through these live
				"Every tenant settled as expected", "succeeded 3  failed 4",
				"card declined", // the real error, not a fixed sentence
				"cancelled",     // the killed Restate invocation
				"hooli", "stark", "wayne",
				"substate audit --tenant ",        // how to look around after it ended
				"Console: open http://127.0.0.1:", // the operator console's URL
			} {
				if !strings.Contains(out, want) {
					t.Errorf("demo output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "executions retry") {
				t.Errorf("four tenants do not reach the courier's order, yet the demo says to retry it:\n%s", out)
			}
			if _, tty := run.out.(*ttyBuffer); tty != strings.Contains(out, "now: ") {
				t.Errorf("status line shown %v on a terminal %v:\n%q", !tty, tty, out)
			}
			for _, tenant := range []string{"hooli", "stark", "wayne"} {
				if !strings.Contains(out, tenant+strings.Repeat(" ", 22-len(tenant))+" running") {
					t.Errorf("%s never moved from running:\n%s", tenant, out)
				}
			}
		})
	}
}

// TestDemoInterrupted stops the demo (as Ctrl-C does) once a tenant has
// succeeded: the summary must still show the view as it is, not blank rows.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs its workflows in real time")
	}
	var out, errOut syncBuffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"demo", "--tenants", "4", "--data-dir", t.TempDir(),
			"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"})
	}()
	workertest.EventuallyWithin(t, time.Minute, func() string {
		if !strings.Contains(out.String(), "→ succeeded") {
			return "no tenant succeeded yet:\n" + out.String()
		}
		return ""
	})
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d: %s", c, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop")
	}
	_, table, _ := strings.Cut(out.String(), "Tenant view after")
	if !regexp.MustCompile(`(?m)^\S+\s+succeeded\s+completed`).MatchString(table) {
		t.Errorf("the summary lacks the tenant that succeeded:\n%s", table)
	}
	if !strings.Contains(table, "Interrupted before") {
		t.Errorf("the summary does not say the demo was interrupted:\n%s", table)
	}
}
