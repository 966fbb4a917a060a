package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/replay"
)

// Settings every scenario shares.
const (
	benchSpread = 10000            // tenants the scenarios spread their events over
	benchIdle   = 60 * time.Second // give up when the view gets nothing for this long
)

// ScenarioResult is what one end-to-end scenario measured.
type ScenarioResult struct {
	Name            string  `json:"name"`
	Events          int     `json:"events"`  // events offered at ingest
	Tenants         int     `json:"tenants"` // tenants in the view at the end
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"eventsPerSecond"`
	Latency         latency `json:"latency"` // ingest → view, per status change
	NoopShare       float64 `json:"noopShare"`
	Duplicates      int     `json:"duplicatesAtIngest"` // dropped by JetStream's duplicate window
	Unchanged       int     `json:"unchangedAtView"`
	Stale           int     `json:"staleAtView"`
	Commits         uint64  `json:"viewCommits"`
	CommitsPerEvent float64 `json:"viewCommitsPerEvent"`
	BytesPerEvent   float64 `json:"viewBytesWrittenPerEvent"`
	AllocsPerEvent  float64 `json:"allocsPerEvent"`
	CPUPerEvent     float64 `json:"cpuMicrosecondsPerEvent"` // user and system time of the whole process
	PeakAnonMiB     float64 `json:"peakAnonMiB"`             // resident, outside the page cache
	PeakRSSMiB      float64 `json:"peakRSSMiB"`              // with the view's mapped pages
	// Worker is where the worker ran: "in process" with the embedded NATS
	// server and the load generator, or "child process" on its own.
	Worker string `json:"worker"`
	// ServerPeakAnonMiB is the bench process's peak (NATS server and load
	// generator) when the worker ran as a child process.
	ServerPeakAnonMiB float64 `json:"benchProcessPeakAnonMiB,omitzero"`
	ViewFileMiB       float64 `json:"viewFileMiB"`
	RawBytes          float64 `json:"rawBytesPerEvent"`
	CanonicalBytes    float64 `json:"canonicalBytesPerEvent"` // as stored, headers included
	IdleBatches       int     `json:"batchesWithoutChange"`
	IdleCommits       int     `json:"commitsOfBatchesWithoutChange"`
	ViewCheck         string  `json:"viewCheck"` // "ok", or what is wrong
	// ConsoleStreams were open during the load, reading the change feed as
	// browsers do; ConsoleDelivered is the share of the view's changes they
	// received; ConsoleResets is how many times the console told a
	// stream that it missed changes (it was dropped for being slow and
	// came back too late to resume), the only way a stream may miss one;
	// ConsoleRepeats counts changes a stream received twice or out of
	// order, which never happens.
	ConsoleStreams   int     `json:"consoleStreams,omitzero"`
	ConsoleDelivered float64 `json:"consoleDelivered,omitzero"`
	Footprint
	ConsoleResets  int64 `json:"consoleResets"`
	ConsoleRepeats int64 `json:"consoleRepeats"`
}

// drive says how a scenario sends: in a closed loop that keeps at most
// window events between ingest and view, at a rate, or both; and for how
// long at most (0: every event).
type drive struct {
	window   int
	rate     float64
	limit    time.Duration
	consoles int // open console change streams during the load
}

// e2e runs events of a load through a fresh pipeline, from ingest to view,
// in a closed loop.
func (b *benchRun) e2e(ctx context.Context, name string, load benchLoad, events []benchEvent) (*ScenarioResult, error) {
	return b.scenario(ctx, name, b.BatchSize, load, events, drive{window: b.window()})
}

// scenario runs events through a fresh pipeline with the given batch size
// as d says, and checks the view against the events sent. When the load
// has no-ops it then sends a burst of them alone, so that whole batches
// change nothing, and counts the commits of such batches.
func (b *benchRun) scenario(ctx context.Context, name string, batch int, load benchLoad, events []benchEvent, d drive) (res *ScenarioResult, err error) {
	p, err := b.open(ctx, name, batch, keysFor(events))
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, p.close(b.Keep)) }()
	stop := p.run(p.normalize, p.project, p.feed)
	var fans *ConsoleFans
	if d.consoles > 0 {
		if fans, err = OpenConsoleFans(p.w.HTTP.URL(), d.consoles); err != nil {
			return nil, firstErr(err, stop())
		}
		defer fans.Close() // when measuring failed: they would reconnect forever
	}
	res, err = b.measure(ctx, p, name, load, events, d)
	if fans != nil && err == nil {
		res.ConsoleStreams = d.consoles
		res.ConsoleDelivered = fans.Delivered(int64(p.view.Stats().Applied)*int64(d.consoles), 10*time.Second)
		res.ConsoleResets, res.ConsoleRepeats = fans.Resets(), fans.Repeats()
	}
	if err == nil && load.shape == loadHalfNoop {
		var burst *ScenarioResult
		if burst, err = b.measure(ctx, p, name+" burst", load, noopBurst(events, 4*b.BatchSize), d); err == nil {
			res.IdleBatches, res.IdleCommits = res.IdleBatches+burst.IdleBatches, res.IdleCommits+burst.IdleCommits
		}
	}
	if err = firstErr(err, stop()); err != nil {
		return nil, err
	}
	res.Tenants, res.ViewCheck = checkView(ctx, p.view, expectedView(events[:res.Events]))
	return res, nil
}

// noopBurst returns n events that change nothing: the last status changes
// sent, each again under a new id.
func noopBurst(events []benchEvent, n int) []benchEvent {
	out := make([]benchEvent, 0, n)
	for i := len(events) - 1; i >= 0 && len(out) < n; i-- {
		if e := events[i]; e.redelivery == 0 {
			e.redelivery = 2
			out = append(out, e)
		}
	}
	return out
}

// measure sends the events through a running pipeline as d says, waits
// until the view has every one sent, and returns the figures.
func (b *benchRun) measure(ctx context.Context, p *benchPipeline, name string, load benchLoad, events []benchEvent, d drive) (*ScenarioResult, error) {
	p.probe.counts() // start over
	logs0 := b.logMark()
	st0, allocs0, cpu0 := p.view.Stats(), mallocs(), cputime.Process()
	mem := sampleMemory(readMemory, 50*time.Millisecond)
	start := time.Now()
	s := p.sender(load, d.window)
	s.rate = d.rate
	var limit <-chan time.Time
	if d.limit > 0 {
		limit = time.After(d.limit)
	}
	sent, err := s.send(ctx, events, limit)
	if err == nil {
		err = p.probe.waitEvents(ctx, s.base+s.toView, benchIdle)
	}
	elapsed := time.Since(start)
	anon, rss := mem.done()
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", name, err)
	}
	c := p.probe.counts()
	st := p.view.Stats()
	n := float64(sent)
	res := &ScenarioResult{
		Name: name, Events: sent, Seconds: elapsed.Seconds(), EventsPerSecond: n / elapsed.Seconds(),
		Latency: latencyOf(c.latencies), Duplicates: s.duplicates, Unchanged: c.unchanged, Stale: c.stale,
		Commits: st.Commits - st0.Commits, AllocsPerEvent: float64(mallocs()-allocs0) / n,
		CPUPerEvent: float64((cputime.Process() - cpu0).Microseconds()) / n,
		PeakAnonMiB: mib(anon), PeakRSSMiB: mib(rss), ViewFileMiB: mib(uint64(p.viewFileSize())),
		RawBytes: float64(s.bytes) / n, IdleBatches: c.idleBatches, IdleCommits: c.idleCommits, Worker: "in process",
	}
	res.NoopShare = float64(s.duplicates+c.unchanged+c.stale) / n
	res.CommitsPerEvent = float64(res.Commits) / n
	res.BytesPerEvent = float64(st.BytesWritten-st0.BytesWritten) / n
	res.CanonicalBytes = canonicalBytes(ctx, p.w.Bus.JetStream)
	res.Footprint = b.footprint(p, logs0, n)
	return res, nil
}

// mib converts bytes to MiB.
func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// keysFor returns how many status-change keys the events use.
func keysFor(events ...[]benchEvent) int {
	n := 0
	for _, evs := range events {
		for _, e := range evs {
			n = max(n, e.key()+1)
		}
	}
	return n
}

// expectedView returns the sub-state every tenant ends in when the events
// are applied with the order rules: the one the newest status change of
// the tenant's newest execution says, whatever the order of arrival.
func expectedView(events ...[]benchEvent) map[string]benchEvent {
	out := make(map[string]benchEvent)
	for _, evs := range events {
		for _, e := range evs {
			t := tenantName(e.tenant)
			if old, ok := out[t]; !ok || e.key() > old.key() {
				out[t] = e
			}
		}
	}
	return out
}

// checkView compares every tenant of the view with what its newest status
// change says, and returns the number of tenants and "ok" or what differs.
func checkView(ctx context.Context, view substate.ViewStore, want map[string]benchEvent) (int, string) {
	views, err := replay.AllViews(ctx, view)
	if err != nil {
		return 0, "list the view: " + err.Error()
	}
	bad, first := 0, ""
	for _, v := range views {
		if msg := checkTenant(v, want); msg != "" {
			if bad++; first == "" {
				first = msg
			}
		}
	}
	switch {
	case bad > 0:
		return len(views), fmt.Sprintf("%d tenants differ from the order rules, e.g. %s", bad, first)
	case len(views) != len(want):
		return len(views), fmt.Sprintf("the view holds %d tenants, want %d", len(views), len(want))
	}
	return len(views), "ok"
}

// checkTenant returns what is wrong with one tenant's view, or "".
func checkTenant(v substate.TenantView, want map[string]benchEvent) string {
	e, ok := want[v.TenantID]
	if !ok {
		return v.TenantID + ": not sent"
	}
	sub, exec, errMsg := e.want()
	if v.WorkflowSubState != sub || v.WorkflowExecutionID != exec || (v.WorkflowErrorMessage != "") != errMsg {
		return fmt.Sprintf("%s: %s exec=%q error=%q, want %s exec=%q", v.TenantID, v.WorkflowSubState, v.WorkflowExecutionID, v.WorkflowErrorMessage, sub, exec)
	}
	return ""
}

// want returns what a tenant's view says after e: the sub-state, the
// execution and whether it has an error.
func (e benchEvent) want() (sub substate.SubState, exec string, errMsg bool) {
	if e.engine {
		switch e.status {
		case substate.EngineSucceeded:
			return substate.StateSucceeded, "", false
		case substate.EngineRunning:
			return substate.StateRunning, benchEngineExec(e.exec), false
		}
		return substate.SubState(e.status), benchEngineExec(e.exec), true // the engine's names are the sub-states
	}
	switch e.status {
	case "SUCCEEDED":
		return substate.StateSucceeded, "", false
	case "FAILED":
		return substate.StateFailed, benchExecPfx + fmt.Sprint(e.exec), true
	}
	return substate.StateRunning, benchExecPfx + fmt.Sprint(e.exec), false
}
