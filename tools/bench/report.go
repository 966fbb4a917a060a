package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

// Report is everything one bench run measured.
type Report struct {
	Machine   machineInfo       `json:"machine"`
	Settings  benchSettings     `json:"settings"`
	DecodeMap []decodeResult    `json:"decodeMap"`
	Stages    []StageResult     `json:"stages"`
	Rebuild   *RebuildResult    `json:"rebuild"`
	Scenarios []*ScenarioResult `json:"scenarios"` // changes, half-noop, out-of-order
	AtRate    *ScenarioResult   `json:"atRate"`
	LargeView *ScenarioResult   `json:"largeView"`
	Naive     *ScenarioResult   `json:"naive"`
	Speedup   float64           `json:"speedupOverNaive"` // changes ÷ naive, events per second
	Targets   []targetResult    `json:"targets"`
}

// machineInfo says where the figures come from.
type machineInfo struct {
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"goVersion"`
}

// benchSettings are the parameters of a run.
type benchSettings struct {
	Events           int     `json:"eventsPerScenario"`
	Spread           int     `json:"tenantsPerScenario"`
	LargeViewTenants int     `json:"largeViewTenants"`
	Rate             float64 `json:"offeredRate"`
	Duration         string  `json:"duration"`
	BatchSize        int     `json:"batchSize"`
	Window           int     `json:"closedLoopWindow"`
	NATS             string  `json:"nats"`
	NATSSync         string  `json:"natsSync"`
}

// latency is a distribution of ingest → view times, in milliseconds.
type latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50Ms"`
	P99     float64 `json:"p99Ms"`
	Max     float64 `json:"maxMs"`
}

// latencyOf summarizes durations.
func latencyOf(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return latency{Samples: len(ds), P50: ms(at(0.50)), P99: ms(at(0.99)), Max: ms(ds[len(ds)-1])}
}

// targetResult is one performance target and how the run did.
type targetResult struct {
	Target string `json:"target"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
}

// judge compares the run with the performance budget.
func (r *Report) judge() {
	changes, half := r.Scenarios[0], r.Scenarios[1]
	if r.Naive.EventsPerSecond > 0 {
		r.Speedup = changes.EventsPerSecond / r.Naive.EventsPerSecond
	}
	slowest := r.slowestDecode()
	idle, idleCommits := 0, 0
	for _, s := range r.All() {
		idle += s.IdleBatches
		idleCommits += s.IdleCommits
	}
	r.Targets = []targetResult{
		atLeast("end to end, every event a change", changes.EventsPerSecond, 25000, "events/s"),
		atLeast("end to end, half the events no-ops", half.EventsPerSecond, 40000, "events/s"),
		atLeast("rebuild from SUBSTATE_EVENTS", r.Rebuild.EventsPerSecond, 60000, "events/s"),
		atMost(fmt.Sprintf("p99 ingest → view at %.0f events/s", r.Settings.Rate), r.AtRate.Latency.P99, 50, "ms"),
		atMost("decode + map per status change, slowest ("+string(slowest.Kind)+")", slowest.NsPerEvent/1000, 4, "µs"),
		{Target: "write transactions for a batch with no change", Want: "0",
			Got: fmt.Sprintf("%d in %d such batches", idleCommits, idle), Met: idleCommits == 0},
		atMost(fmt.Sprintf("peak RSS outside the page cache, %d tenants", r.LargeView.Tenants), r.LargeView.PeakAnonMiB, 64, "MiB"),
		atLeast("end to end over the naive baseline", r.Speedup, 10, "×"),
		atMost("log per change at the configured level", changes.LogBytesPerEvent, MaxLogBytesPerChange, "bytes"),
		{Target: "ERROR log lines", Want: "0", Got: fmt.Sprint(errorLinesOf(r.All())), Met: errorLinesOf(r.All()) == 0},
	}
}

// MaxLogBytesPerChange is the log budget: the average bytes of log a
// change of the view writes at the default level (docs/performance.md).
const MaxLogBytesPerChange = 250

// errorLinesOf returns the ERROR log lines of the scenarios.
func errorLinesOf(scenarios []*ScenarioResult) int {
	n := 0
	for _, s := range scenarios {
		n += s.LogErrorLines
	}
	return n
}

// slowestDecode returns the slowest decode of the kinds that carry one
// status change each. The reconciler's poll is not among them: it holds
// a DescribeExecution answer and a page of history, and is made once per
// stale run, not for every status change.
func (r *Report) slowestDecode() decodeResult {
	var out decodeResult
	for _, d := range r.DecodeMap {
		if d.Kind != substate.RawStepFunctionsPoll && d.NsPerEvent > out.NsPerEvent {
			out = d
		}
	}
	return out
}

// wrong lists what the run found incorrect: a view that differs from the
// order rules, a rebuild that differs from the live view. Figures never
// count here.
func (r *Report) wrong() []string {
	var out []string
	for _, sc := range r.All() {
		if sc.ViewCheck != "ok" {
			out = append(out, fmt.Sprintf("%s: view: %s", sc.Name, sc.ViewCheck))
		}
	}
	if r.Rebuild.EqualsLive != "yes" {
		out = append(out, "rebuild: "+r.Rebuild.EqualsLive)
	}
	return out
}

// All returns every end-to-end result.
func (r *Report) All() []*ScenarioResult {
	return append(slices.Clone(r.Scenarios), r.AtRate, r.LargeView, r.Naive)
}

func atLeast(name string, got, want float64, unit string) targetResult {
	return targetResult{Target: name, Want: "≥ " + figure(want) + " " + unit, Got: figure(got) + " " + unit, Met: got >= want}
}

func atMost(name string, got, want float64, unit string) targetResult {
	return targetResult{Target: name, Want: "≤ " + figure(want) + " " + unit, Got: figure(got) + " " + unit, Met: got <= want}
}

// figure prints a number with the precision a reader needs.
func figure(v float64) string {
	switch {
	case v >= 1000:
		return thousands(int64(v + 0.5))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// thousands writes n with thousands separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// print writes the report as tables.
func (r *Report) print(w io.Writer) {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "substate bench: %d CPUs (%s), %s/%s, %s; %s NATS (sync %s), batch %d, %d events per scenario over %d tenants\n",
		m.CPUs, m.CPU, m.OS, m.Arch, m.GoVersion, s.NATS, s.NATSSync, s.BatchSize, s.Events, s.Spread)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nDECODE + MAP\tBYTES\tNS/EVENT\tALLOCS/EVENT")
	for _, d := range r.DecodeMap {
		note := ""
		if d.Kind == substate.RawStepFunctionsPoll {
			note = "\t(a describe and a page of history, once per stale run)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f%s\n", d.Kind, d.Bytes, figure(d.NsPerEvent), d.AllocsPerEvent, note)
	}
	fmt.Fprintln(tw, "\nSTAGE ALONE\tEVENTS\tSECONDS\tEVENTS/S\tCPU µS/EVENT")
	for _, st := range append(slices.Clone(r.Stages), r.Rebuild.StageResult) {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\n", st.Stage, st.Events, st.Seconds, figure(st.EventsPerSecond), figure(st.CPUPerEvent))
	}
	fmt.Fprintln(tw, "\nEND TO END\tEVENTS\tEVENTS/S\tP50 MS\tP99 MS\tMAX MS\tNO-OPS\tTX/EVENT\tBYTES/EVENT\tALLOCS/EVENT\tCPU µS/EVENT\tPEAK ANON MIB\tVIEW")
	for _, sc := range r.All() {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.0f%%\t%.4f\t%s\t%.0f\t%s\t%.0f\t%s\n", r.label(sc), sc.Events, figure(sc.EventsPerSecond),
			ms(sc.Latency, sc.Latency.P50), ms(sc.Latency, sc.Latency.P99), ms(sc.Latency, sc.Latency.Max), 100*sc.NoopShare,
			sc.CommitsPerEvent, figure(sc.BytesPerEvent), sc.AllocsPerEvent, figure(sc.CPUPerEvent), sc.PeakAnonMiB, cmp.Or(sc.ViewCheck, "-"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n* the worker ran as a process of its own on the bench's NATS server (as with --nats-url): its memory alone;\n  the bench process (NATS server, load generator) peaked at %.0f MiB anon. The other scenarios run all of it in one process.\n",
		r.LargeView.ServerPeakAnonMiB)
	fmt.Fprintf(w, "naive baseline: one publish acknowledgement awaited and one view transaction per event; the pipeline is %.1f× faster\n", r.Speedup)
	fmt.Fprintf(w, "events: %.0f bytes raw, %.0f bytes canonical as stored; the rebuilt view equals the live one: %s\n",
		r.Scenarios[0].RawBytes, r.Scenarios[0].CanonicalBytes, r.Rebuild.EqualsLive)
	if c := r.Scenarios[0]; c.RawDiskBytes > 0 {
		fmt.Fprintf(w, "disk per event, every event a change: %.0f bytes SUBSTATE_RAW, %.0f SUBSTATE_EVENTS, %.0f SUBSTATE_CHANGES\n",
			c.RawDiskBytes, c.EventsDiskBytes, c.ChangesDiskBytes)
	}
	fmt.Fprintf(w, "logs, every event a change: %.0f bytes per change at the configured level\n", r.Scenarios[0].LogBytesPerEvent)
	for _, sc := range r.Scenarios {
		if sc.ConsoleStreams > 0 {
			fmt.Fprintf(w, "consoles: with %d open change streams the pipeline ran at %s events/s (%s without); the streams received %.1f%% of the changes (%d resets, %d repeats)\n",
				sc.ConsoleStreams, figure(sc.EventsPerSecond), figure(r.Scenarios[0].EventsPerSecond), 100*sc.ConsoleDelivered, sc.ConsoleResets, sc.ConsoleRepeats)
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTARGET\tWANT\tGOT\t")
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Target, t.Want, t.Got, map[bool]string{true: "met", false: "MISSED"}[t.Met])
	}
	tw.Flush()
}

// ms prints a latency, or "-" where none was measured.
func ms(l latency, v float64) string {
	if l.Samples == 0 {
		return "-"
	}
	return figure(v)
}

// label names a scenario in the table.
func (r *Report) label(sc *ScenarioResult) string {
	switch sc {
	case r.AtRate:
		return fmt.Sprintf("at %s events/s", figure(r.Settings.Rate))
	case r.LargeView:
		return fmt.Sprintf("large view (%s tenants)*", thousands(int64(sc.Tenants)))
	case r.Naive:
		return "naive baseline"
	}
	return sc.Name
}

// thisMachine describes the machine the bench runs on.
func thisMachine() machineInfo {
	return machineInfo{CPUs: runtime.NumCPU(), CPU: cpuModel(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
}

// cpuModel returns the processor's name from /proc/cpuinfo, or "unknown".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown"
}

// compareViews compares two views tenant by tenant, every field but
// updatedAt.
func compareViews(ctx context.Context, live, rebuilt substate.ViewStore) ([]replay.TenantDiff, error) {
	a, err := replay.AllViews(ctx, live)
	if err != nil {
		return nil, err
	}
	b, err := replay.AllViews(ctx, rebuilt)
	if err != nil {
		return nil, err
	}
	return replay.Compare(a, b), nil
}

// describeDiffs says in one line how two views differ.
func describeDiffs(diffs []replay.TenantDiff) string {
	d := diffs[0]
	what := "in one view only"
	if len(d.Fields) > 0 {
		what = fmt.Sprintf("%s live %q, rebuilt %q", d.Fields[0].Field, d.Fields[0].Live, d.Fields[0].Replay)
	}
	return fmt.Sprintf("no: %d tenants differ, e.g. %s: %s", len(diffs), d.TenantID, what)
}
