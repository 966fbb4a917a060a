// Package bench measures the real pipeline against the performance budget:
// throughput, latency, view writes and memory of each stage and end to end,
// with the worker in process or in a child process, and the flat cost of a
// long history. "substate bench" runs it.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/worker"
)

// Config is one run of the bench: the sizes of its scenarios, how it
// reports, and the worker settings every scenario's pipeline runs with.
type Config struct {
	Events     int           // events per scenario
	Tenants    int           // tenants of the large-view scenario (up to 1,000,000)
	Rate       float64       // offered rate of the latency scenario, in events per second
	Duration   time.Duration // how long the latency scenario and the naive baseline send
	JSON       bool          // print the report as JSON
	Keep       bool          // keep each scenario's data directory under <data-dir>/bench
	Profile    string        // write a CPU profile of the whole run to this file
	MemProfile string        // write a heap profile to this file (large-view, flat-cost or incident scenario)
	Flat       int           // run only the flat-cost scenario with this many events; 0 runs the others
	FlatLimit  time.Duration // stop the flat-cost scenario after this long (0 = no limit)
	Groups     int           // run only the groups scenario over a view of this many tenants; 0 runs the others
	Incident   time.Duration // run only the incident scenario, each of its three phases this long; 0 runs the others
	// IncidentRate is the incident's offered rate in events a second; 0
	// means IncidentRate.
	IncidentRate float64
	Deadlines    int // run only the deadlines scenario with this many tenants holding deadlines; 0 runs the others
	// Steady runs only the steady scenario for this long: a worker in a
	// child process taking SteadyRate status changes a second over HTTP;
	// 0 runs the others.
	Steady time.Duration
	// SteadyRate is the steady scenario's offered rate in events a
	// second; 0 means SteadyRate.
	SteadyRate float64

	worker.Flags
}

// ErrWrongView is returned by Run when a scenario's view, or the rebuilt
// one, is not what the order rules say: a wrong view fails the run, a slow
// one never does. Run has printed what was wrong.
var ErrWrongView = errors.New("bench: a view is wrong")

// benchRun is one run of the bench.
type benchRun struct {
	*Config
	root string   // <data-dir>/bench
	logs *os.File // <data-dir>/bench.log: the workers' logs
	load benchLoad
	rng  *rand.Rand
}

// Run runs every scenario, or the flat-cost scenario alone, and prints the
// report to stdout and its progress to stderr.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	if err := c.validate(); err != nil {
		return err
	}
	err := checkSharedServer(ctx, c.Flags)
	if err != nil {
		return err
	}
	if c.Profile != "" {
		stop, err := startProfile(c.Profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	b := &benchRun{
		Config: &c, root: filepath.Join(c.DataDir, "bench"),
		load: benchLoad{shape: loadChanges, tenants: spread(c.Events), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		rng:  rand.New(rand.NewPCG(1, 2)),
	}
	if b.logs, err = worker.OpenLogFile(filepath.Join(c.DataDir, "bench.log")); err != nil {
		return err
	}
	defer func() { _ = b.logs.Close() }() // unbuffered: every line was written as it came
	progress := func(step string) { fmt.Fprintf(stderr, "bench: %s\n", step) }
	if c.Flat > 0 {
		return b.runFlat(ctx, stdout, progress)
	}
	if c.Groups > 0 {
		return b.runGroups(ctx, stdout, progress)
	}
	if c.Incident > 0 {
		return b.runIncident(ctx, stdout, progress)
	}
	if c.Deadlines > 0 {
		return b.runDeadlines(ctx, stdout, progress)
	}
	if c.Steady > 0 {
		return b.runSteady(ctx, stdout, progress)
	}
	rep, err := b.run(ctx, progress)
	if err != nil {
		return err
	}
	if !c.Keep {
		os.Remove(b.root)
	}
	if c.JSON {
		err = termtext.WriteJSON(stdout, rep)
	} else {
		rep.print(stdout)
	}
	if wrong := rep.wrong(); err == nil && len(wrong) > 0 {
		for _, w := range wrong {
			fmt.Fprintln(stderr, "substate: bench:", w)
		}
		return ErrWrongView
	}
	return err
}

// runFlat runs the flat-cost scenario alone and prints its report.
func (b *benchRun) runFlat(ctx context.Context, stdout io.Writer, progress func(string)) error {
	rep, err := b.flat(ctx, progress)
	if err != nil {
		return err
	}
	if b.JSON {
		return termtext.WriteJSON(stdout, rep)
	}
	rep.print(stdout)
	return nil
}

// runGroups runs the groups scenario alone and prints its report.
func (b *benchRun) runGroups(ctx context.Context, stdout io.Writer, progress func(string)) error {
	rep, err := b.groups(ctx, progress)
	if err != nil {
		return err
	}
	if b.JSON {
		return termtext.WriteJSON(stdout, rep)
	}
	rep.print(stdout)
	return nil
}

// spread is the number of tenants a scenario of n events runs over:
// benchSpread, and fewer for a short run so that every tenant still gets
// ten events (five executions).
func spread(n int) int { return min(benchSpread, max(n/10, 1)) }

// validate checks the sizes.
func (c *Config) validate() error {
	switch {
	case c.Events < 1000:
		return substate.Errorf(substate.EINVALID, "--events must be at least 1000")
	case c.Tenants < 1 || c.Tenants > 1_000_000:
		return substate.Errorf(substate.EINVALID, "--tenants must be between 1 and 1,000,000")
	case c.Rate <= 0 || c.Duration <= 0:
		return substate.Errorf(substate.EINVALID, "--rate and --duration must be positive")
	case c.BatchSize < 1:
		return substate.Errorf(substate.EINVALID, "--batch-size must be positive")
	case c.Incident < 0 || c.IncidentRate < 0:
		return substate.Errorf(substate.EINVALID, "--incident and --incident-rate must not be negative")
	case c.Steady < 0 || c.SteadyRate < 0:
		return substate.Errorf(substate.EINVALID, "--steady and --steady-rate must not be negative")
	case c.Groups < 0 || c.Groups > 10_000_000:
		return substate.Errorf(substate.EINVALID, "--groups must be between 0 and 10,000,000")
	case c.Deadlines < 0 || c.Deadlines > 10_000_000:
		return substate.Errorf(substate.EINVALID, "--deadlines must be between 0 and 10,000,000")
	}
	return nil
}

// run runs the scenarios in turn, each on a fresh pipeline.
func (b *benchRun) run(ctx context.Context, progress func(string)) (*Report, error) {
	rep := &Report{Machine: thisMachine(), Settings: b.settings()}
	var err error
	progress("decode and map")
	if rep.DecodeMap, err = measureDecode(b.load, 300*time.Millisecond); err != nil {
		return nil, err
	}
	progress("stages alone and rebuild")
	if rep.Stages, rep.Rebuild, err = b.stages(ctx); err != nil {
		return nil, err
	}
	for _, shape := range []string{loadChanges, loadHalfNoop, loadOutOfOrder} {
		progress("end to end: " + shape)
		load := b.load
		load.shape = shape
		res, err := b.e2e(ctx, shape, load, load.events(b.Events, b.rng))
		if err != nil {
			return nil, err
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	progress(fmt.Sprintf("end to end: changes with %d open console streams", Consoles))
	load := b.load
	events := load.events(b.Events, b.rng)
	res, err := b.scenario(ctx, "changes, consoles open", b.BatchSize, load, events, drive{window: b.window(), consoles: Consoles})
	if err != nil {
		return nil, err
	}
	rep.Scenarios = append(rep.Scenarios, res)
	progress("latency at the offered rate")
	if rep.AtRate, err = b.atRate(ctx); err != nil {
		return nil, err
	}
	progress("large view")
	if rep.LargeView, err = b.largeView(ctx); err != nil {
		return nil, err
	}
	progress("naive baseline")
	if rep.Naive, err = b.naive(ctx); err != nil {
		return nil, err
	}
	rep.judge()
	return rep, nil
}

// settings are the run's parameters, for the report.
func (b *benchRun) settings() benchSettings {
	return benchSettings{
		Events: b.Events, Spread: b.load.tenants, LargeViewTenants: b.Tenants, Rate: b.Rate,
		Duration: b.Duration.String(), BatchSize: b.BatchSize, Window: b.window(),
		NATS: b.natsKind(), NATSSync: b.NATSSync,
	}
}

func (b *benchRun) natsKind() string {
	if b.NATSURL != "" {
		return "external"
	}
	return "embedded"
}

// window is how many events the closed loop keeps between ingest and view:
// enough for full batches at every stage.
func (b *benchRun) window() int { return 8 * b.BatchSize }

// open opens a fresh pipeline for one scenario, first handing back to the
// system what earlier scenarios left on the heap, so that each peak of
// resident memory is the scenario's own.
func (b *benchRun) open(ctx context.Context, name string, batch, keys int) (*benchPipeline, error) {
	debug.FreeOSMemory()
	return openPipeline(ctx, b.Flags, b.logs, filepath.Join(b.root, name), batch, keys)
}

// StageResult is the rate of one stage running alone on a backlog.
type StageResult struct {
	Stage           string  `json:"stage"`
	Events          int     `json:"events"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"eventsPerSecond"`
	CPUPerEvent     float64 `json:"cpuMicrosecondsPerEvent"`
}

// timer measures the wall and CPU time of a stage.
type timer struct {
	start time.Time
	cpu   time.Duration
}

func startTimer() timer { return timer{time.Now(), cputime.Process()} }

// stage returns the figures of n events since the timer started.
func (t timer) stage(name string, n int) StageResult {
	d, cpu := time.Since(t.start), cputime.Process()-t.cpu
	return StageResult{Stage: name, Events: n, Seconds: d.Seconds(), EventsPerSecond: float64(n) / d.Seconds(),
		CPUPerEvent: float64(cpu.Microseconds()) / float64(n)}
}

// stages measures each stage alone on the backlog the one before left:
// ingest with no consumer running, then the normalizer over SUBSTATE_RAW,
// then the projector over SUBSTATE_EVENTS; then the same events again
// through the HTTP ingress, and a rebuild from SUBSTATE_EVENTS.
func (b *benchRun) stages(ctx context.Context) (_ []StageResult, _ *RebuildResult, err error) {
	events := b.load.events(b.Events, b.rng)
	p, err := b.open(ctx, "stages", b.BatchSize, keysFor(events))
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = firstErr(err, p.close(b.Keep)) }()
	n := len(events)
	t := startTimer()
	if _, err := p.sender(b.load, 0).send(ctx, events, nil); err != nil {
		return nil, nil, err
	}
	out := []StageResult{t.stage("ingest (publish to SUBSTATE_RAW)", n)}
	stop, t := p.run(p.normalize), startTimer()
	err = p.waitNormalized(ctx, uint64(n), benchIdle)
	out = append(out, t.stage("normalizer (SUBSTATE_RAW → SUBSTATE_EVENTS)", n))
	if err = firstErr(err, stop()); err != nil {
		return nil, nil, err
	}
	stop, t = p.run(p.project), startTimer()
	err = p.probe.waitEvents(ctx, int64(n), benchIdle)
	out = append(out, t.stage("projector (SUBSTATE_EVENTS → view)", n))
	if err = firstErr(err, stop()); err != nil {
		return nil, nil, err
	}
	t = startTimer()
	if err := p.postAll(ctx, b.load, redelivered(events)); err != nil {
		return nil, nil, err
	}
	out = append(out, t.stage(fmt.Sprintf("ingest over HTTP (%d clients, an event a request)", httpClients), n))
	rb, err := b.rebuild(ctx, p)
	return out, rb, err
}

// redelivered returns the events again under new ids, so that JetStream
// stores them again.
func redelivered(events []benchEvent) []benchEvent {
	out := make([]benchEvent, len(events))
	for i, e := range events {
		e.redelivery = 3
		out[i] = e
	}
	return out
}

// firstErr returns the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// RebuildResult is the rate of a rebuild from the stream and whether the
// rebuilt view equals the live one.
type RebuildResult struct {
	StageResult
	EqualsLive string `json:"equalsLive"` // "yes", or how they differ
}

// rebuild folds the pipeline's SUBSTATE_EVENTS into a new view file as
// "substate rebuild" does and compares it with the live view.
func (b *benchRun) rebuild(ctx context.Context, p *benchPipeline) (*RebuildResult, error) {
	t := startTimer()
	db, prog, err := replay.RebuildView(ctx, p.w.Bus.JetStream, filepath.Join(p.dir, "rebuilt.db"), replay.Range{}, b.BatchSize, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }() // a throwaway view, already synced
	res := &RebuildResult{StageResult: t.stage("rebuild (SUBSTATE_EVENTS → new view)", prog.Events), EqualsLive: "yes"}
	if diffs, err := compareViews(ctx, p.view, db); err != nil {
		return nil, err
	} else if len(diffs) > 0 {
		res.EqualsLive = describeDiffs(diffs)
	}
	return res, nil
}

// atRate sends changes at the offered rate for the duration and measures
// ingest → view latency.
func (b *benchRun) atRate(ctx context.Context) (*ScenarioResult, error) {
	events := b.load.events(int(b.Rate*b.Duration.Seconds()), b.rng)
	return b.scenario(ctx, "at-rate", b.BatchSize, b.load, events, drive{rate: b.Rate})
}

// naive runs the baseline: the same pipeline with batches of one event,
// so one publish acknowledgement is awaited and one view transaction
// committed per event, for the duration.
func (b *benchRun) naive(ctx context.Context) (*ScenarioResult, error) {
	events := b.load.events(b.Events, b.rng)
	return b.scenario(ctx, "naive", 1, b.load, events, drive{window: b.window(), limit: b.Duration})
}
