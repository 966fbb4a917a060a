package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

// ttyBuffer is an output that says it is a terminal.
type ttyBuffer struct{ syncBuffer }

func (*ttyBuffer) Terminal() bool { return true }

// publishMany puts n canonical events of 500 tenants on SUBSTATE_EVENTS.
func publishMany(tb testing.TB, b *bus.Bus, n int) {
	tb.Helper()
	events := make([]substate.Event, n)
	for i := range events {
		d := substate.EventData{TenantID: fmt.Sprintf("tenant-%03d", i%500), Provider: substate.ProviderEngine,
			ExecutionID: "run", SubState: substate.SubStates[i/500%4], Revision: substate.Revision(i + 1),
			OccurredAt: workertest.T0.Add(time.Duration(i) * time.Millisecond), ExecutionStartedAt: workertest.T0}
		d.Normalize()
		events[i] = substate.NewEvent(fmt.Sprintf("ev-%d", i), d)
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), events); err != nil {
		tb.Fatal(err)
	}
}

func TestRebuildLargeStream(t *testing.T) {
	b := newTestBus(t)
	publishMany(t, b, 50000)
	out := filepath.Join(t.TempDir(), "view.db")
	// Time enough for a loaded machine under -race: the test measures no speed.
	code, stdout, stderr := runCLIFor(t, 5*time.Minute, "rebuild", "--out", out, "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker))
	if code != 0 {
		t.Fatalf("rebuild: exit %d: %s", code, stderr)
	}
	summary := regexp.MustCompile(`^rebuilt .*view\.db: 50000 events \(sequences 1 to 50000\), 500 tenants, 50000 changes, 0 unchanged, 0 stale in \S+ \(\d+ events/s\)\n$`)
	if !summary.MatchString(stderr) || stdout != "" {
		t.Fatalf("not a terminal, so only the summary: %q", stderr)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
	db := state.NewDB(out)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cp, _ := db.Checkpoint(context.Background()); cp != 50000 {
		t.Errorf("checkpoint %d, want 50000", cp)
	}

	code, _, stderr = runCLI(t, "rebuild", "--out", out, "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker))
	if code != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("rebuild over an existing file: exit %d %s", code, stderr)
	}
}

func TestRebuildOnTerminalShowsProgress(t *testing.T) {
	b := newTestBus(t)
	publishMany(t, b, 3000)
	var tty ttyBuffer
	m := &Main{Stdout: &tty, Stderr: &tty}
	out := filepath.Join(t.TempDir(), "view.db")
	if code := m.Run(context.Background(), []string{"rebuild", "--out", out, "--until-seq", "2000", "--batch-size", "100", "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker)}); code != 0 {
		t.Fatalf("exit %d: %s", code, tty.String())
	}
	s := tty.String()
	if !strings.HasPrefix(s, "\rreplaying SUBSTATE_EVENTS: sequence 100 of 2000 (5%), 100 events, ") {
		t.Errorf("first progress line: %q", s)
	}
	if !strings.Contains(s, "\r\x1b[Krebuilt ") || !strings.Contains(s, "2000 events (sequences 1 to 2000)") {
		t.Errorf("no summary after a cleared line: %q", s)
	}
}

func TestRebuildUntilTime(t *testing.T) {
	b := newTestBus(t)
	publishMany(t, b, 10)
	time.Sleep(20 * time.Millisecond)
	cut := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(20 * time.Millisecond)
	publishMany(t, b, 10)
	out := filepath.Join(t.TempDir(), "past.db")
	code, _, stderr := runCLI(t, "rebuild", "--out", out, "--until", cut, "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker))
	if code != 0 || !strings.Contains(stderr, "10 events (sequences 1 to 10)") {
		t.Fatalf("rebuild --until: exit %d %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "rebuild", "--out", out, "--until", cut, "--until-seq", "3", "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker))
	if code != 2 || !strings.Contains(stderr, "--until") {
		t.Fatalf("both --until and --until-seq: exit %d %s", code, stderr)
	}
}
