package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/tools/bench"
)

// The bench's child worker is this test binary running main (see
// TestMain).
func init() {
	bench.WorkerCommand = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
		return cmd, nil
	}
}

// TestBenchJSON runs a small bench end to end and checks that it reports
// every figure of the performance budget, that each scenario's view is
// what the order rules say, and the counts that do not depend on timing.
// It never judges the speed.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline eight times")
	}
	dir := t.TempDir()
	// A bound against a hang only: a loaded machine under -race is slow, and
	// the test judges no speed.
	code, out, errOut := runCLIFor(t, 8*time.Minute, "bench", "--json", "--data-dir", dir,
		"--nats-listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn",
		"--events", "3000", "--tenants", "4000", "--rate", "2000", "--duration", "500ms")
	if code != 0 {
		t.Fatalf("bench exited with %d: %s", code, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(rep.DecodeMap) != len(substate.RawKinds) || len(rep.Stages) != 4 || len(rep.Scenarios) != 4 {
		t.Fatalf("report has %d decode figures, %d stages, %d scenarios", len(rep.DecodeMap), len(rep.Stages), len(rep.Scenarios))
	}
	for _, d := range rep.DecodeMap {
		if d.NsPerEvent <= 0 || d.Bytes == 0 {
			t.Errorf("decode %s: %+v", d.Kind, d)
		}
	}
	for _, st := range append(rep.Stages, rep.Rebuild.StageResult) {
		if st.Events != 3000 || st.EventsPerSecond <= 0 {
			t.Errorf("stage %s: %+v", st.Stage, st)
		}
	}
	if rep.Rebuild.EqualsLive != "yes" {
		t.Errorf("rebuild equals live: %s", rep.Rebuild.EqualsLive)
	}
	for _, sc := range rep.All() {
		checkScenario(t, sc)
	}
	checkCounts(t, &rep)
	// Every stream receives every change once, in order, unless the
	// console told it that it missed some (dropped for being slow, which a
	// loaded machine may cause): never silently.
	c := rep.Scenarios[3]
	if c.ConsoleStreams != bench.Consoles || c.ConsoleRepeats != 0 || c.ConsoleDelivered > 1 || (c.ConsoleDelivered < 1 && c.ConsoleResets == 0) {
		t.Errorf("console scenario: %d streams received %.3f of the changes (%d resets, %d repeats), want %d streams and all, or a reset for what they missed",
			c.ConsoleStreams, c.ConsoleDelivered, c.ConsoleResets, c.ConsoleRepeats, bench.Consoles)
	}
	if len(rep.Targets) != 10 {
		t.Errorf("%d targets, want 10", len(rep.Targets))
	}
}

// checkScenario checks what every end-to-end scenario reports.
func checkScenario(t *testing.T, sc *bench.ScenarioResult) {
	t.Helper()
	if sc.ViewCheck != "ok" {
		t.Errorf("%s: view check: %s", sc.Name, sc.ViewCheck)
	}
	if sc.Events == 0 || sc.EventsPerSecond <= 0 || sc.Latency.P99 < sc.Latency.P50 || sc.Latency.Max < sc.Latency.P99 {
		t.Errorf("%s: %+v", sc.Name, sc)
	}
	if sc.Worker == "child process" {
		if sc.ServerPeakAnonMiB <= 0 {
			t.Errorf("%s: no figure for the bench process", sc.Name)
		}
	} else if sc.Latency.Samples == 0 {
		t.Errorf("%s: no latency", sc.Name)
	}
	if sc.Commits == 0 || sc.BytesPerEvent <= 0 || sc.AllocsPerEvent <= 0 || sc.PeakAnonMiB <= 0 || sc.RawBytes < 500 || sc.CanonicalBytes <= 0 {
		t.Errorf("%s: missing figures: %+v", sc.Name, sc)
	}
}

// checkCounts checks the figures that follow from the loads alone.
func checkCounts(t *testing.T, rep *bench.Report) {
	t.Helper()
	changes, half, ooo := rep.Scenarios[0], rep.Scenarios[1], rep.Scenarios[2]
	if changes.NoopShare != 0 || changes.Tenants != 300 {
		t.Errorf("changes: %d no-op share %.2f, %d tenants", changes.Events, changes.NoopShare, changes.Tenants)
	}
	if changes.CommitsPerEvent >= 0.5 {
		t.Errorf("changes: %.3f commits per event, want batches", changes.CommitsPerEvent)
	}
	if half.Duplicates != 750 || half.Stale != 750 || half.NoopShare != 0.5 {
		t.Errorf("half-noop: %d duplicates, %d stale, share %.2f; want 750, 750, 0.5", half.Duplicates, half.Stale, half.NoopShare)
	}
	if half.IdleBatches == 0 || half.IdleCommits != 0 {
		t.Errorf("half-noop: %d commits in %d batches without a change, want 0 in some", half.IdleCommits, half.IdleBatches)
	}
	if ooo.Stale == 0 {
		t.Error("out-of-order: no stale event")
	}
	if rep.Naive.CommitsPerEvent != 1 {
		t.Errorf("naive: %.3f commits per event, want 1", rep.Naive.CommitsPerEvent)
	}
	if rep.LargeView.Tenants != 4000 {
		t.Errorf("large view: %d tenants, want 4000", rep.LargeView.Tenants)
	}
}

// TestBenchTable checks the human report of a bench run: every section and
// every target.
func TestBenchTable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline eight times")
	}
	code, out, errOut := runCLIFor(t, 3*time.Minute, "bench", "--data-dir", t.TempDir(),
		"--nats-listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn",
		"--events", "1000", "--tenants", "1000", "--rate", "2000", "--duration", "300ms")
	if code != 0 {
		t.Fatalf("bench exited with %d: %s", code, errOut)
	}
	for _, want := range []string{"DECODE + MAP", "STAGE ALONE", "END TO END", "changes", "half-noop", "out-of-order",
		"at 2,000 events/s", "large view (1,000 tenants)*", "naive baseline", "TARGET", "rebuild from SUBSTATE_EVENTS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// On a NATS server of its own (--nats-url) the bench runs every scenario,
// deletes the streams it made, and refuses a server that holds substate's
// streams already: it must never touch a deployment's data.
func TestBenchNATSURL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline eight times")
	}
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	args := []string{"bench", "--json", "--data-dir", t.TempDir(), "--nats-url", b.ClientURL(), "--nats-nkey", bustest.Seed(t, b, bus.Worker), "--http-addr", "127.0.0.1:0",
		"--log-level", "warn", "--events", "1000", "--tenants", "1000", "--rate", "2000", "--duration", "300ms"}
	code, out, errOut := runCLIFor(t, 3*time.Minute, args...)
	if code != 0 {
		t.Fatalf("bench exited with %d: %s", code, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Settings.NATS != "external" {
		t.Fatalf("report: %v, nats %q", err, rep.Settings.NATS)
	}
	for _, sc := range rep.All() {
		if sc.ViewCheck != "ok" {
			t.Errorf("%s: view check: %s", sc.Name, sc.ViewCheck)
		}
	}
	ctx := context.Background()
	for name := range b.JetStream.StreamNames(ctx).Name() {
		t.Errorf("stream %s left on the server", name)
	}

	if err := bus.DefaultTopology().EnsureStreams(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLIFor(t, time.Minute, args...)
	if code == 0 || !strings.Contains(errOut, "exists") {
		t.Fatalf("bench on a server with substate's streams: exit %d, %s", code, errOut)
	}
}

// TestBenchIncident runs a short incident scenario and checks what it
// reports: both phases, every sent event either accepted or refused, the
// console page receiving the changes of its phase, and the view right
// when nothing was refused. It never judges the speed.
func TestBenchIncident(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline with HTTP clients for three seconds")
	}
	code, out, errOut := runCLIFor(t, 4*time.Minute, "bench", "--json", "--data-dir", t.TempDir(),
		"--nats-listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn",
		"--incident", "1s", "--tenants", "2000")
	if code != 0 {
		t.Fatalf("bench exited with %d: %s", code, errOut)
	}
	var rep bench.IncidentReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(rep.Phases) != 3 || rep.Tenants != 2000 || rep.Rate != bench.IncidentRate {
		t.Fatalf("report %+v", rep)
	}
	refused := 0
	for _, p := range rep.Phases {
		if p.Offered != bench.IncidentRate || p.Accepted+p.Refused+p.Behind != p.Offered || p.Accepted == 0 || p.CPUPerEvent <= 0 || p.PeakRSSMiB <= 0 {
			t.Errorf("phase %+v", p)
		}
		refused += p.Refused
	}
	// The page may also get the last changes of the phase before (it opens
	// while the feed publishes them): more than the phase's is no fault,
	// a change twice or out of order is.
	if c := rep.Phases[1]; c.ConsoleRepeats != 0 || (c.ConsoleReceived < 1 && c.ConsoleResets == 0) {
		t.Errorf("the console page received %.3f of its phase's changes with %d resets and %d repeats, want all or a reset, and no repeat", c.ConsoleReceived, c.ConsoleResets, c.ConsoleRepeats)
	}
	if refused == 0 && rep.ViewCheck != "ok" {
		t.Errorf("view: %s", rep.ViewCheck)
	}
}

// TestBenchSteady runs the steady scenario for a second on a small view:
// the worker in a child process takes every event over HTTP, applies and
// checks it, and the report splits its CPU from the bench's. It never
// judges the speed.
func TestBenchSteady(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process with HTTP clients for a second")
	}
	code, out, errOut := runCLIFor(t, 4*time.Minute, "bench", "--json", "--data-dir", t.TempDir(),
		"--nats-listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn",
		"--steady", "1s", "--steady-rate", "500", "--tenants", "1000")
	if code != 0 {
		t.Fatalf("bench exited with %d: %s", code, errOut)
	}
	var rep bench.SteadyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Tenants != 1000 || rep.Rate != 500 || rep.Offered != 500 || rep.Accepted+rep.Refused+rep.Behind != rep.Offered || rep.Accepted == 0 {
		t.Fatalf("report %+v", rep)
	}
	// The worker's check verified the fill before the phase, and every
	// accepted event in it.
	if rep.EvidenceChecked < rep.Accepted || rep.WorkerCPUPerEvent <= 0 || rep.EvidenceCPUPerEvent <= 0 || rep.BenchCPUPerEvent <= 0 || rep.CommitsPerEvent <= 0 || rep.BytesPerEvent <= 0 || rep.WorkerPeakRSSMiB <= 0 {
		t.Errorf("report %+v", rep)
	}
	if rep.Refused == 0 && rep.ViewCheck != "ok" {
		t.Errorf("view: %s", rep.ViewCheck)
	}
	// Every accepted status change changes its tenant's view, so the
	// feed carries one change for each.
	if l := rep.FeedLag; rep.Refused == 0 && (l.Samples != rep.Accepted || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99) {
		t.Errorf("feed lag %+v for %d accepted", l, rep.Accepted)
	}
}
