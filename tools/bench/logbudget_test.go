package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/worker"
)

// The log budget (docs/performance.md): at the default level, in both
// formats, a mix of changes writes at most MaxLogBytesPerChange bytes of
// log per change on average, one "view changed" line each, and no ERROR
// line. Two mixes: "changes", every event a change of its tenant's view,
// running then succeeded or failed with a real error, as in "substate
// bench"; and "retries", engine executions whose first attempt fails with
// the provider's error, backs off with a retry count and runs again
// before it succeeds or fails. A line that carries a provider's error, or
// is the tenant's backing-off or error sub-state, is at INFO or WARN and
// names the tenant: the fault is the tenant's, not substate's. The rate
// limit is off, so every change's line is counted: the budget holds for
// the lines themselves, not because a burst was cut short.
func TestLogBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	for _, shape := range []string{loadChanges, loadRetries} {
		for _, format := range []string{"text", "json"} {
			t.Run(shape+"/"+format, func(t *testing.T) {
				res, events, log := runChanges(t, shape, 4000, func(f *worker.Flags) { f.LogFormat, f.LogRate = format, 0 })
				if res.ViewCheck != "ok" {
					t.Fatalf("view: %s", res.ViewCheck)
				}
				if got := res.LogBytesPerEvent; got > MaxLogBytesPerChange || got == 0 {
					t.Errorf("%.0f bytes of log per change, want at most %d (and some)", got, MaxLogBytesPerChange)
				}
				if res.LogErrorLines != 0 {
					t.Errorf("%d ERROR lines:\n%s", res.LogErrorLines, grepLines(log, "ERROR"))
				}
				lines := changeLines(t, format, log)
				if len(lines) != res.Events {
					t.Errorf("%d view changed lines for %d changes, want one each", len(lines), res.Events)
				}
				checkProviderErrorLines(t, shape, events[:res.Events], lines)
				t.Logf("%s, %s: %.0f bytes of log per change", shape, format, res.LogBytesPerEvent)
			})
		}
	}
}

// checkProviderErrorLines checks the "view changed" lines of a provider's
// errors: every line with an error attribute or a new sub-state of error
// or backing-off is at INFO or WARN and names the tenant, and the retries
// load has one such line for each of its error and backing-off changes,
// the backing-off ones with their retry count.
func checkProviderErrorLines(t *testing.T, shape string, events []benchEvent, lines []map[string]string) {
	t.Helper()
	var errs, backoffs, bad int
	for _, l := range lines {
		isErr, isBackoff := l["new"] == string(substate.StateError), l["new"] == string(substate.StateBackingOff)
		if l["error"] == "" && !isErr && !isBackoff {
			continue
		}
		if lv := l["level"]; (lv != "INFO" && lv != "WARN") || !strings.HasPrefix(l["tenant"], "tenant-") {
			if bad++; bad <= 5 {
				t.Errorf("a provider's error logs at %s with tenant %q: %v", lv, l["tenant"], l)
			}
		}
		switch {
		case isErr && l["error"] != "":
			errs++
		case isBackoff && l["retries"] == "1":
			backoffs++
		}
	}
	if shape != loadRetries {
		return
	}
	var wantErrs, wantBackoffs int
	for _, e := range events {
		switch e.status {
		case substate.EngineError:
			wantErrs++
		case substate.EngineBackingOff:
			wantBackoffs++
		}
	}
	if errs != wantErrs || backoffs != wantBackoffs || wantBackoffs == 0 {
		t.Errorf("%d error lines with the error and %d backing-off lines with retries=1, want %d and %d", errs, backoffs, wantErrs, wantBackoffs)
	}
}

// changeLines returns the attributes of the log's "view changed" lines
// (level, tenant, new, error, retries, …), values as strings, in a log of
// the given format.
func changeLines(t *testing.T, format, log string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for l := range strings.Lines(log) {
		if !strings.Contains(l, "view changed") {
			continue
		}
		var attrs map[string]string
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("a JSON log line does not decode: %v: %s", err, l)
			}
			attrs = make(map[string]string, len(m))
			for k, v := range m {
				attrs[k] = fmt.Sprint(v)
			}
		} else {
			var err error
			if attrs, err = parseLogfmt(strings.TrimSuffix(l, "\n")); err != nil {
				t.Fatalf("a text log line does not parse: %v: %s", err, l)
			}
		}
		if attrs["msg"] == "view changed" {
			out = append(out, attrs)
		}
	}
	return out
}

// parseLogfmt returns the key=value pairs of a line of slog's text
// handler, quoted values unquoted.
func parseLogfmt(l string) (map[string]string, error) {
	out := map[string]string{}
	for l = strings.TrimLeft(l, " "); l != ""; l = strings.TrimLeft(l, " ") {
		k, rest, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("no = after %q", l)
		}
		if !strings.HasPrefix(rest, `"`) {
			v, after, _ := strings.Cut(rest, " ")
			out[k], l = v, after
			continue
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		if out[k], err = strconv.Unquote(q); err != nil {
			return nil, err
		}
		l = rest[len(q):]
	}
	return out, nil
}

// With the default rate limit a burst writes fewer lines than changes, and
// says how many it held back.
func TestLogRateLimitInABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	res, _, log := runChanges(t, loadChanges, 4000, func(f *worker.Flags) { f.LogRate = 100 })
	lines := strings.Count(log, "msg=\"view changed\"")
	if lines >= res.Events || !strings.Contains(log, "log lines suppressed") {
		t.Errorf("%d view changed lines for %d changes at 100 a second, and no suppressed line:\n%s", lines, res.Events, grepLines(log, "suppressed"))
	}
}

// runChanges runs a scenario of the load shape with n events on a fresh
// worker whose flags set changes, and returns its result, the events and
// its log.
func runChanges(t *testing.T, shape string, n int, set func(*worker.Flags)) (*ScenarioResult, []benchEvent, string) {
	t.Helper()
	dir := t.TempDir()
	f := worker.DefaultFlags()
	f.NATSListen, f.HTTPAddr = "127.0.0.1:-1", "127.0.0.1:0"
	set(&f)
	b := &benchRun{
		Config: &Config{Events: n, Flags: f}, root: filepath.Join(dir, "bench"),
		load: benchLoad{shape: shape, tenants: spread(n), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		rng:  rand.New(rand.NewPCG(1, 2)),
	}
	var err error
	if b.logs, err = worker.OpenLogFile(filepath.Join(dir, "bench.log")); err != nil {
		t.Fatal(err)
	}
	defer b.logs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	events := b.load.events(n, b.rng)
	res, err := b.e2e(ctx, shape, b.load, events)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(b.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	return res, events, string(log)
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
