package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/replay"
)

// IncidentReport is the incident scenario's report: an incident-sized
// burst of status changes through the real HTTP ingress on a large view,
// with no console open, with a console page following the changes, and
// with no console again.
type IncidentReport struct {
	Tenants int     `json:"tenants"` // in the view before the burst
	Rate    float64 `json:"offeredEventsPerSecond"`
	Seconds float64 `json:"secondsPerPhase"`
	Clients int     `json:"httpClients"`
	// Phases are the burst without a console, with one, and without one
	// again: each phase runs on what the ones before it left (fuller
	// duplicate windows, larger stores, more garbage), so the console's
	// phase is set against the two around it.
	Phases []IncidentPhase `json:"phases"`
	// ConsoleCost is how much of the accepted rate the console took: 1 -
	// with / the mean of the two phases without.
	ConsoleCost float64 `json:"consoleCost"`
	ViewCheck   string  `json:"viewCheck"`
}

// IncidentPhase is one burst.
type IncidentPhase struct {
	Name     string  `json:"name"`
	Offered  int     `json:"offered"`  // events the clients were to send in the phase
	Accepted int     `json:"accepted"` // answered 202
	Refused  int     `json:"refused"`  // answered otherwise (503 when the backlog is full)
	Behind   int     `json:"behind"`   // not sent in time: every client was waiting for an answer
	Rate     float64 `json:"acceptedPerSecond"`
	// LagP99 and LagMax are the time from a status change's request to
	// the view's commit that applied it, in milliseconds.
	LagP99      float64 `json:"lagP99Ms"`
	LagMax      float64 `json:"lagMaxMs"`
	CPUPerEvent float64 `json:"cpuMicrosecondsPerEvent"` // the whole process: server, worker, clients
	PeakRSSMiB  float64 `json:"peakRSSMiB"`
	PeakAnonMiB float64 `json:"peakAnonMiB"`
	// ConsoleReceived is the share of the phase's changes the console
	// page received (with a console only); a little above 1 when the page,
	// on opening, also got the last changes of the phase before.
	ConsoleReceived float64 `json:"consoleReceived,omitzero"`
	// EvidenceVerified is how many events the evidence check verified
	// during the phase (it runs every 5 s within --evidence-check-budget
	// of one core), EvidenceOther how many it found otherwise (0 when
	// nothing is forged), EvidenceBusy the seconds it worked, and
	// EvidenceRate what it verifies per second of work.
	EvidenceVerified int64   `json:"evidenceVerified"`
	EvidenceOther    int64   `json:"evidenceOther"`
	EvidenceBusy     float64 `json:"evidenceBusySeconds"`
	EvidenceRate     float64 `json:"evidenceVerifiedPerBusySecond"`
	// ConsoleResets is how many times the console told the page it
	// missed changes (dropped for being slow): the only way it may miss one.
	ConsoleResets int64 `json:"consoleResets"`
	// ConsoleRepeats is how many changes the page received twice or after
	// a later one: 0 when the console is right.
	ConsoleRepeats int64 `json:"consoleRepeats"`
}

// Budget of the incident scenario.
const (
	IncidentRate    = 5000 // events a second offered, unless --incident-rate says otherwise
	incidentClients = 64   // keep-alive connections, as many API destination deliveries in flight
)

// runIncident runs the incident scenario alone and prints its report.
func (b *benchRun) runIncident(ctx context.Context, stdout io.Writer, progress func(string)) error {
	rep, err := b.incident(ctx, progress)
	if err != nil {
		return err
	}
	if b.JSON {
		return termtext.WriteJSON(stdout, rep)
	}
	rep.print(stdout)
	if rep.ViewCheck != "ok" && refused(rep.Phases) == 0 {
		return ErrWrongView
	}
	return nil
}

// incident fills a view of --tenants tenants, then posts changes to the
// HTTP ingress at --incident-rate for --incident, in three phases: with no
// console open, with a console page following the change stream, and with
// no console again.
func (b *benchRun) incident(ctx context.Context, progress func(string)) (_ *IncidentReport, err error) {
	load := b.load
	load.tenants = b.Tenants
	rate := cmp.Or(b.IncidentRate, IncidentRate)
	perPhase := int(rate * b.Incident.Seconds())
	rounds := (perPhase + b.Tenants - 1) / b.Tenants
	fill := load.changes(b.Tenants, 0)
	names := incidentPhases
	// A phase's events are made when it starts and dropped after it (the
	// view check makes them again): held for the whole run, 60 s phases
	// would add some 60 MB of the bench's own to the RSS it reports.
	phase := func(i int) []benchEvent { return load.changes(perPhase, 1+i*rounds) }
	keys := keysFor(fill)
	for i := range names {
		keys = max(keys, keysFor(phase(i)))
	}
	p, err := b.open(ctx, "incident", b.BatchSize, keys)
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, p.close(b.Keep)) }()
	check, err := newEvidenceCheck(p)
	if err != nil {
		return nil, err
	}
	stop := p.run(p.normalize, p.project, p.feed, check.run)
	defer func() { err = firstErr(err, stop()) }()
	progress(fmt.Sprintf("incident: a view of %d tenants", b.Tenants))
	s := p.sender(load, 0)
	if _, err := s.send(ctx, fill, nil); err != nil {
		return nil, err
	}
	if err := p.probe.waitEvents(ctx, s.base+s.toView, benchIdle); err != nil {
		return nil, err
	}
	rep := &IncidentReport{Tenants: b.Tenants, Rate: rate, Seconds: b.Incident.Seconds(), Clients: incidentClients}
	for i, name := range names {
		progress(fmt.Sprintf("incident: %.0f events/s over HTTP for %s, %s", rate, b.Incident, name))
		ph, err := b.burst(ctx, p, load, phase(i), rate, i == incidentConsole, check)
		if err != nil {
			return nil, err
		}
		ph.Name = name
		rep.Phases = append(rep.Phases, *ph)
		if i == 0 && b.MemProfile != "" {
			if err := writeHeapProfile(b.MemProfile); err != nil {
				return nil, err
			}
		}
	}
	rep.ConsoleCost = consoleCost(rep.Phases)
	if err := stop(); err != nil {
		return nil, err
	}
	stop = func() error { return nil }
	rep.ViewCheck = "not checked: requests were refused, so which status change is a tenant's last is not known"
	if refused(rep.Phases) == 0 {
		_, rep.ViewCheck = checkView(ctx, p.view, expectedView(fill, sentOf(phase, rep.Phases)))
	}
	return rep, nil
}

// incidentPhases name the incident's phases; the one at incidentConsole
// has the console open.
var incidentPhases = []string{"no console", "console open", "no console again"}

const incidentConsole = 1

// consoleCost is the share of the accepted rate the console's phase lost
// against the mean of the phases around it.
func consoleCost(phases []IncidentPhase) float64 {
	var without float64
	n := 0
	for i, p := range phases {
		if i != incidentConsole {
			without += p.Rate
			n++
		}
	}
	if n == 0 || without == 0 || len(phases) <= incidentConsole {
		return 0
	}
	return 1 - phases[incidentConsole].Rate/(without/float64(n))
}

// refused counts the requests the phases had refused.
func refused(phases []IncidentPhase) int {
	n := 0
	for _, p := range phases {
		n += p.Refused
	}
	return n
}

// sentOf returns the events of each phase that were sent (in order: the
// rest fell behind and were not); phase makes the i-th phase's events.
func sentOf(phase func(int) []benchEvent, got []IncidentPhase) []benchEvent {
	var out []benchEvent
	for i, g := range got {
		out = append(out, phase(i)[:g.Offered-g.Behind]...)
	}
	return out
}

// burst posts the events at IncidentRate from incidentClients connections
// and waits until the view applied every accepted one.
func (b *benchRun) burst(ctx context.Context, p *benchPipeline, load benchLoad, events []benchEvent, rate float64, console bool, check *evidenceCheck) (*IncidentPhase, error) {
	var fans *ConsoleFans
	if console {
		// The page must receive the changes made after it opened: let the
		// feed publish the earlier ones first.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if n, err := p.view.OutboxLen(); err == nil && n == 0 {
				break
			}
		}
	}
	changes0 := p.view.Stats().Applied
	if console {
		var err error
		if fans, err = OpenConsoleFans(p.w.HTTP.URL(), 1); err != nil {
			return nil, err
		}
		defer fans.Close()
	}
	p.probe.counts() // start over
	before := p.probe.events.Load()
	cpu0, verified0, other0, busy0 := cputime.Process(), check.verified.Load(), check.other.Load(), check.busy.Load()
	mem := sampleMemory(readMemory, 50*time.Millisecond)
	post := p.paced(ctx, load, events, rate)
	err := p.probe.waitEvents(ctx, before+post.accepted.Load(), benchIdle)
	anon, rss := mem.done()
	if err != nil {
		return nil, err
	}
	lat := latencyOf(p.probe.counts().latencies)
	n := post.accepted.Load()
	ph := &IncidentPhase{
		Offered: len(events), Accepted: int(n), Refused: int(post.refused.Load()), Behind: len(events) - int(post.sent),
		Rate: float64(n) / post.seconds, LagP99: lat.P99, LagMax: lat.Max,
		CPUPerEvent: float64((cputime.Process() - cpu0).Microseconds()) / float64(max(n, 1)),
		PeakRSSMiB:  mib(rss), PeakAnonMiB: mib(anon),
		EvidenceVerified: check.verified.Load() - verified0, EvidenceOther: check.other.Load() - other0,
		EvidenceBusy: time.Duration(check.busy.Load() - busy0).Seconds(),
	}
	if ph.EvidenceBusy > 0 {
		ph.EvidenceRate = float64(ph.EvidenceVerified) / ph.EvidenceBusy
	}
	if fans != nil {
		ph.ConsoleReceived = fans.Delivered(int64(p.view.Stats().Applied-changes0), 10*time.Second)
		ph.ConsoleResets = fans.Resets()
		ph.ConsoleRepeats = fans.Repeats()
	}
	return ph, nil
}

// pacedPost is what the paced clients did.
type pacedPost struct {
	sent              int
	accepted, refused atomic.Int64
	seconds           float64 // from the first request to the last answer
}

// paced posts the events to the worker's EventBridge ingress at rate (see
// pace), marking each sent for the probe.
func (p *benchPipeline) paced(ctx context.Context, load benchLoad, events []benchEvent, rate float64) *pacedPost {
	return pace(ctx, p.w.HTTP.URL(), p.w.Flags.IngestAPIKey, load, events, rate, func(e benchEvent) { p.probe.markSent(e.key(), time.Now()) })
}

// pace posts the events to the EventBridge ingress of the worker at url,
// each at its time (start + i/rate), from incidentClients keep-alive
// connections, calling sent (when set) before each request. An event
// whose time comes while every client waits for an answer waits too;
// those the phase's end finds unsent are not sent (Behind).
func pace(ctx context.Context, url, key string, load benchLoad, events []benchEvent, rate float64, sent func(benchEvent)) *pacedPost {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: incidentClients, MaxConnsPerHost: incidentClients}}
	defer client.CloseIdleConnections()
	url += "/v1/ingest/eventbridge"
	out := &pacedPost{}
	next := make(chan benchEvent)
	var wg sync.WaitGroup
	for range incidentClients {
		wg.Go(func() {
			for e := range next {
				if sent != nil {
					sent(e)
				}
				if postEvent(ctx, client, url, key, load.raw(e, nil).Body) == nil {
					out.accepted.Add(1)
				} else {
					out.refused.Add(1) // a 503 (backlog full) or a failed connection
				}
			}
		})
	}
	start := time.Now()
	end := start.Add(time.Duration(float64(len(events)) / rate * float64(time.Second)))
	for i, e := range events {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > time.Millisecond {
			if timex.Sleep(ctx, d) != nil {
				break
			}
		}
		if time.Now().After(end.Add(time.Second)) {
			break // behind by more than a second at the phase's end
		}
		next <- e
		out.sent++
	}
	close(next)
	wg.Wait()
	out.seconds = time.Since(start).Seconds()
	return out
}

func (r *IncidentReport) print(w io.Writer) {
	fmt.Fprintf(w, "incident: a view of %d tenants, %d changes/s offered over HTTP (%d keep-alive connections) for %.0f s per phase\n",
		r.Tenants, int(r.Rate), r.Clients, r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tOFFERED\tACCEPTED\tREFUSED\tBEHIND\tACCEPTED/S\tLAG P99 MS\tLAG MAX MS\tCPU µS/EVENT\tPEAK RSS MIB\tPEAK ANON MIB\tCONSOLE\t")
	for _, p := range r.Phases {
		console := "-"
		if p.ConsoleReceived > 0 {
			console = fmt.Sprintf("%.1f%% received", 100*p.ConsoleReceived)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%.0f\t%.0f\t%.1f\t%.0f\t%.0f\t%s\t\n", p.Name, p.Offered, p.Accepted, p.Refused, p.Behind,
			figure(p.Rate), p.LagP99, p.LagMax, p.CPUPerEvent, p.PeakRSSMiB, p.PeakAnonMiB, console)
	}
	_ = tw.Flush()
	for _, p := range r.Phases {
		fmt.Fprintf(w, "evidence check, %s: %d verified, %d otherwise, in %.1f s of work (%s verified per second of work)\n",
			p.Name, p.EvidenceVerified, p.EvidenceOther, p.EvidenceBusy, figure(p.EvidenceRate))
	}
	fmt.Fprintf(w, "the console cost %.1f%% of the accepted rate (against the mean of the phases without); view: %s\n", 100*r.ConsoleCost, r.ViewCheck)
}

// evidenceInterval is how often the incident's evidence check runs: more
// often than the worker's default minute, so that each phase holds
// several rounds.
const evidenceInterval = 5 * time.Second

// evidenceCheck runs the worker's evidence check beside the pipeline, as
// "substate run" does (--evidence-check-budget, every evidenceInterval),
// counting what it verified and the time it worked.
type evidenceCheck struct {
	checker  *replay.Checker
	verified atomic.Int64 // events checked and found verified
	other    atomic.Int64 // events checked with any other outcome
	busy     atomic.Int64 // nanoseconds the check worked
	checked  atomic.Uint64
}

// newEvidenceCheck builds the worker's check.
func newEvidenceCheck(p *benchPipeline) (*evidenceCheck, error) {
	ch, err := p.w.EvidenceChecker()
	if err != nil {
		return nil, err
	}
	return &evidenceCheck{checker: ch}, nil
}

// run checks the events stored since its last round, every
// evidenceInterval, until ctx is done.
func (e *evidenceCheck) run(ctx context.Context) error {
	t := time.NewTicker(evidenceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, last, _, err := e.checker.Reader.Bounds(ctx, substate.StreamEvents)
		next := e.checked.Load() + 1
		if err != nil || last < next {
			continue
		}
		res, err := e.checker.Run(ctx, replay.Range{FromSeq: next, ToSeq: last})
		if err != nil {
			continue // stopped, or the next round retries
		}
		for o, n := range res.Counts {
			if o == replay.CheckVerified {
				e.verified.Add(int64(n))
			} else {
				e.other.Add(int64(n))
			}
		}
		e.busy.Add(int64(res.Busy))
		e.checked.Store(last)
	}
}
