package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/publishers"
)

// SteadyRate is the steady scenario's offered rate when --steady-rate is
// not given: a moderate load, well below what the two cores take.
const SteadyRate = 2000

// steadyEvidenceInterval is the child worker's --evidence-check-interval in
// the steady scenario: often enough that the phase holds several checks.
const steadyEvidenceInterval = "5s"

// Worker metrics the steady scenario reads besides the large view's.
const (
	metricEvidence        = "substate_evidence_events_total"
	metricEvidenceSeconds = "substate_evidence_check_seconds_total"
)

// SteadyReport is the steady scenario's report: status changes posted at a
// moderate rate to the HTTP ingress of a worker in a child process, whose
// CPU is measured alone, its evidence check included.
type SteadyReport struct {
	Tenants  int     `json:"tenants"` // in the view before the phase
	Rate     float64 `json:"offeredEventsPerSecond"`
	Seconds  float64 `json:"seconds"`
	Clients  int     `json:"httpClients"`
	Offered  int     `json:"offered"`
	Accepted int     `json:"accepted"`
	Refused  int     `json:"refused"`
	Behind   int     `json:"behind"`
	// AcceptedRate is what the ingress accepted a second.
	AcceptedRate float64 `json:"acceptedPerSecond"`
	// WorkerCPUPerEvent is the worker process's CPU time per accepted
	// event, from the first request until its view applied the last event
	// and its evidence check verified it: the HTTP ingress, normalizer,
	// projector, change feed and evidence check, without the NATS server.
	WorkerCPUPerEvent float64 `json:"workerCpuMicrosecondsPerEvent"`
	// EvidenceCPUPerEvent is the part of it the evidence check worked.
	EvidenceCPUPerEvent float64 `json:"evidenceCpuMicrosecondsPerEvent"`
	// EvidenceChecked is how many events the worker's evidence check
	// checked in that time.
	EvidenceChecked int `json:"evidenceChecked"`
	// BenchCPUPerEvent is the bench process's: the NATS server and the
	// HTTP clients.
	BenchCPUPerEvent float64 `json:"benchCpuMicrosecondsPerEvent"`
	// CommitsPerEvent is the view's transactions per accepted event: at a
	// moderate rate the batches are small.
	CommitsPerEvent float64 `json:"viewCommitsPerEvent"`
	// BytesPerEvent is what the view's commits wrote to its file per
	// accepted event: the pages the batch's changes dirtied.
	BytesPerEvent float64 `json:"viewBytesWrittenPerEvent"`
	// FeedLag is the time from a status change's request to its change on
	// the change feed, as a reader of SUBSTATE_CHANGES sees it: what the
	// batch lingers of both stages, the view's commit and the feed's
	// publish add up to.
	FeedLag          latency `json:"feedLag"`
	WorkerPeakRSSMiB float64 `json:"workerPeakRSSMiB"`
	ViewCheck        string  `json:"viewCheck"`
}

// runSteady runs the steady scenario alone and prints its report.
func (b *benchRun) runSteady(ctx context.Context, stdout io.Writer, progress func(string)) error {
	rep, err := b.steady(ctx, progress)
	if err != nil {
		return err
	}
	if b.JSON {
		err = termtext.WriteJSON(stdout, rep)
	} else {
		rep.print(stdout)
	}
	if err == nil && rep.ViewCheck != "ok" && rep.Refused == 0 {
		return ErrWrongView
	}
	return err
}

// steady fills a view of --tenants tenants on a worker in a child process
// (its evidence check every steadyEvidenceInterval), waits until the check
// has verified the fill, then posts status changes to its HTTP ingress at
// --steady-rate for --steady, and measures the worker's CPU until it has
// applied and checked every accepted one.
func (b *benchRun) steady(ctx context.Context, progress func(string)) (_ *SteadyReport, err error) {
	load := b.load
	load.tenants = b.Tenants
	rate := cmp.Or(b.SteadyRate, SteadyRate)
	fill, events := load.changes(b.Tenants, 0), load.changes(int(rate*b.Steady.Seconds()), 1)
	srv, child, closeRun, err := b.openChildRun(ctx, "steady", "--evidence-check-interval", steadyEvidenceInterval)
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, closeRun()) }()
	progress(fmt.Sprintf("steady: a view of %d tenants", b.Tenants))
	s := &sender{pub: publishers.NewJetStream(srv.JetStream), load: load, inflight: 2048}
	if _, err := s.send(ctx, fill, nil); err != nil {
		return nil, err
	}
	if err := child.waitApplied(ctx, uint64(len(fill)), benchIdle); err != nil {
		return nil, err
	}
	if err := child.waitChecked(ctx, uint64(len(fill))); err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("steady: %.0f events/s over HTTP for %s", rate, b.Steady))
	names := []string{metricCPU, metricEvidence, metricEvidenceSeconds, metricCommits, metricWritten}
	m0, err := child.metrics(names...)
	if err != nil {
		return nil, err
	}
	lag, err := watchFeed(srv.Conn, maxKey(events)+1)
	if err != nil {
		return nil, err
	}
	cpu0, mem := cputime.Process(), sampleMemory(child.memory, 50*time.Millisecond)
	post := pace(ctx, "http://"+child.http, b.IngestAPIKey, load, events, rate, lag.markSent)
	n := int(post.accepted.Load())
	err = child.waitApplied(ctx, uint64(len(fill)+n), benchIdle)
	if err == nil {
		err = child.waitChecked(ctx, uint64(len(fill)+n))
	}
	_, rss := mem.done()
	feed := lag.stop(n)
	if err != nil {
		return nil, err
	}
	benchCPU := cputime.Process() - cpu0
	m1, err := child.metrics(names...)
	if err != nil {
		return nil, err
	}
	per := func(v float64) float64 { return v * 1e6 / float64(max(n, 1)) }
	rep := &SteadyReport{Tenants: b.Tenants, Rate: rate, Seconds: b.Steady.Seconds(), Clients: incidentClients,
		Offered: len(events), Accepted: n, Refused: int(post.refused.Load()), Behind: len(events) - post.sent,
		AcceptedRate:        float64(n) / post.seconds,
		WorkerCPUPerEvent:   per(m1[metricCPU] - m0[metricCPU]),
		EvidenceCPUPerEvent: per(m1[metricEvidenceSeconds] - m0[metricEvidenceSeconds]),
		EvidenceChecked:     int(m1[metricEvidence] - m0[metricEvidence]),
		BenchCPUPerEvent:    per(benchCPU.Seconds()),
		CommitsPerEvent:     (m1[metricCommits] - m0[metricCommits]) / float64(max(n, 1)),
		BytesPerEvent:       (m1[metricWritten] - m0[metricWritten]) / float64(max(n, 1)),
		FeedLag:             feed,
		WorkerPeakRSSMiB:    mib(rss),
		ViewCheck:           "not checked: requests were refused, so which status change is a tenant's last is not known",
	}
	db, err := child.stop()
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }() // read only to check it
	if rep.Refused == 0 {
		_, rep.ViewCheck = checkView(ctx, db, expectedView(fill, events[:post.sent]))
	}
	return rep, nil
}

// waitChecked blocks until the worker's evidence check has checked n
// events since it started. It reads the worker's /metrics every 100 ms,
// uncompressed: a read is the worker's work, which the steady scenario
// counts as its own, and the check runs every few seconds, so reading it
// every 5 ms (as the view's count is read) only put the bench's reads into
// the figure (about 1 to 4 µs an event, within the spread of a run).
func (c *childWorker) waitChecked(ctx context.Context, n uint64) error {
	return waitCountEvery(ctx, n, benchIdle, 100*time.Millisecond, "the worker's evidence check checked", func() (uint64, bool, error) {
		m, err := c.metrics(metricEvidence)
		return uint64(m[metricEvidence]), true, err
	})
}

func (r *SteadyReport) print(w io.Writer) {
	fmt.Fprintf(w, "steady: a view of %d tenants, %d changes/s offered over HTTP (%d keep-alive connections) for %.0f s to a worker in a child process\n",
		r.Tenants, int(r.Rate), r.Clients, r.Seconds)
	fmt.Fprintf(w, "offered %d, accepted %d (%s/s), refused %d, behind %d\n", r.Offered, r.Accepted, figure(r.AcceptedRate), r.Refused, r.Behind)
	fmt.Fprintf(w, "worker CPU %.1f µs per accepted event, its evidence check's %.1f of it (%d events checked); the bench's (NATS server, HTTP clients) %.1f\n",
		r.WorkerCPUPerEvent, r.EvidenceCPUPerEvent, r.EvidenceChecked, r.BenchCPUPerEvent)
	fmt.Fprintf(w, "request → change feed: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d changes)\n", r.FeedLag.P50, r.FeedLag.P99, r.FeedLag.Max, r.FeedLag.Samples)
	fmt.Fprintf(w, "view commits per event %.3f, bytes written per event %s; worker peak RSS %.0f MiB; view: %s\n", r.CommitsPerEvent, figure(r.BytesPerEvent), r.WorkerPeakRSSMiB, r.ViewCheck)
}

// maxKey is the largest key of events, -1 for none.
func maxKey(events []benchEvent) int {
	k := -1
	for _, e := range events {
		k = max(k, e.key())
	}
	return k
}
