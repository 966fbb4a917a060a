package bench

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/worker"
)

// The log budget (docs/performance.md): the changes scenario — every event
// a change of its tenant's view, running then succeeded or failed with a
// real error, as in "substate bench" — writes at most MaxLogBytesPerChange
// bytes of log per change on average at the default level, and no ERROR
// line, in both formats. The rate limit is off, so every change's line is
// counted: the budget holds for the lines themselves, not because a burst
// was cut short.
func TestLogBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			res, log := runChanges(t, 4000, func(f *worker.Flags) { f.LogFormat, f.LogRate = format, 0 })
			if res.ViewCheck != "ok" {
				t.Fatalf("view: %s", res.ViewCheck)
			}
			if got := res.LogBytesPerEvent; got > MaxLogBytesPerChange || got == 0 {
				t.Errorf("%.0f bytes of log per change, want at most %d (and some)", got, MaxLogBytesPerChange)
			}
			if res.LogErrorLines != 0 {
				t.Errorf("%d ERROR lines:\n%s", res.LogErrorLines, grepLines(log, "ERROR"))
			}
			if n := strings.Count(log, "view changed"); n != res.Events {
				t.Errorf("%d view changed lines for %d changes, want one each", n, res.Events)
			}
			t.Logf("%s: %.0f bytes of log per change", format, res.LogBytesPerEvent)
		})
	}
}

// With the default rate limit a burst writes fewer lines than changes, and
// says how many it held back.
func TestLogRateLimitInABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	res, log := runChanges(t, 4000, func(f *worker.Flags) { f.LogRate = 100 })
	lines := strings.Count(log, "msg=\"view changed\"")
	if lines >= res.Events || !strings.Contains(log, "log lines suppressed") {
		t.Errorf("%d view changed lines for %d changes at 100 a second, and no suppressed line:\n%s", lines, res.Events, grepLines(log, "suppressed"))
	}
}

// runChanges runs the changes scenario with n events on a fresh worker
// whose flags set changes, and returns its result and its log.
func runChanges(t *testing.T, n int, set func(*worker.Flags)) (*ScenarioResult, string) {
	t.Helper()
	dir := t.TempDir()
	f := worker.DefaultFlags()
	f.NATSListen, f.HTTPAddr = "127.0.0.1:-1", "127.0.0.1:0"
	set(&f)
	b := &benchRun{
		Config: &Config{Events: n, Flags: f}, root: filepath.Join(dir, "bench"),
		load: benchLoad{shape: loadChanges, tenants: spread(n), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		rng:  rand.New(rand.NewPCG(1, 2)),
	}
	var err error
	if b.logs, err = worker.OpenLogFile(filepath.Join(dir, "bench.log")); err != nil {
		t.Fatal(err)
	}
	defer b.logs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.e2e(ctx, loadChanges, b.load, b.load.events(n, b.rng))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(b.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	return res, string(log)
}

// grepLines returns the lines of log that contain s, at most 20.
func grepLines(log, s string) string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, s) && len(out) < 20 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
