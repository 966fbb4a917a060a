package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
)

// Worker metrics the large-view scenario reads.
const (
	metricCommits = "substate_view_commits_total"
	metricWritten = "substate_view_written_bytes_total"
	metricMallocs = "go_memstats_mallocs_total"
	metricCPU     = "process_cpu_seconds_total"
)

// largeView fills a view with --tenants tenants, one execution each, then
// sends the scenario's events on it. The worker runs in a child process
// connected to the bench's NATS server (as with --nats-url), so that its
// memory is measured alone: the figure a deployment sizes a worker by.
// The NATS server and the load generator stay in the bench's process.
func (b *benchRun) largeView(ctx context.Context) (_ *ScenarioResult, err error) {
	load := b.load
	load.tenants = b.Tenants
	fill, events := load.changes(b.Tenants, 0), load.changes(b.Events, 1)
	srv, child, closeRun, err := b.openChildRun(ctx, "large-view")
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, closeRun()) }()
	s := &sender{pub: publishers.NewJetStream(srv.JetStream), load: load, inflight: 2048}
	if _, err := s.send(ctx, fill, nil); err != nil {
		return nil, err
	}
	if err := child.waitApplied(ctx, uint64(len(fill)), benchIdle); err != nil {
		return nil, err
	}
	res, err := b.measureChild(ctx, child, s, events, len(fill))
	if err != nil {
		return nil, err
	}
	db, err := child.stop()
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }() // read only to check it
	res.Tenants, res.ViewCheck = checkView(ctx, db, expectedView(fill, events))
	res.ViewFileMiB = mib(uint64(fileSize(db.Path)))
	return res, nil
}

// measureChild sends the events to the child worker and measures its
// throughput, its commits, allocations and CPU time from its metrics, and
// its peak memory.
func (b *benchRun) measureChild(ctx context.Context, child *childWorker, s *sender, events []benchEvent, before int) (*ScenarioResult, error) {
	m0, err := child.metrics(metricCommits, metricWritten, metricMallocs, metricCPU)
	if err != nil {
		return nil, err
	}
	mem, self := sampleMemory(child.memory, 50*time.Millisecond), sampleMemory(readMemory, 50*time.Millisecond)
	start, bytes0 := time.Now(), s.bytes
	_, err = s.send(ctx, events, nil)
	if err == nil {
		err = child.waitApplied(ctx, uint64(before+len(events)), benchIdle)
	}
	elapsed := time.Since(start)
	anon, rss := mem.done()
	selfAnon, _ := self.done()
	if err != nil {
		return nil, err
	}
	m1, err := child.metrics(metricCommits, metricWritten, metricMallocs, metricCPU)
	if err != nil {
		return nil, err
	}
	n := float64(len(events))
	res := &ScenarioResult{
		Name: "large-view", Events: len(events), Seconds: elapsed.Seconds(), EventsPerSecond: n / elapsed.Seconds(),
		Commits:        uint64(m1[metricCommits] - m0[metricCommits]),
		AllocsPerEvent: (m1[metricMallocs] - m0[metricMallocs]) / n,
		CPUPerEvent:    (m1[metricCPU] - m0[metricCPU]) * 1e6 / n,
		PeakAnonMiB:    mib(anon), PeakRSSMiB: mib(rss), ServerPeakAnonMiB: mib(selfAnon),
		RawBytes: float64(s.bytes-bytes0) / n, Worker: "child process",
	}
	res.CommitsPerEvent = float64(res.Commits) / n
	res.BytesPerEvent = (m1[metricWritten] - m0[metricWritten]) / n
	res.CanonicalBytes = canonicalBytes(ctx, child.js)
	return res, nil
}

// openChildRun opens the bench's NATS for the scenario name, with the
// streams (the embedded server storing under the scenario's directory, or
// --nats-url), and starts a worker in a child process on it. closeRun
// kills the child, then releases the server and the directory.
func (b *benchRun) openChildRun(ctx context.Context, name string, extra ...string) (srv *bus.Bus, child *childWorker, closeRun func() error, err error) {
	dir := filepath.Join(b.root, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, nil, err
	}
	debug.FreeOSMemory() // see open
	f := b.Flags
	f.DataDir = dir
	if srv, err = bus.Open(f.BusConfig(f.LoggerTo(b.logs))); err != nil {
		return nil, nil, nil, err
	}
	free := func() error { return release(srv, srv.Close, dir, b.Keep) }
	if err := f.Topology().EnsureStreams(ctx, srv.JetStream); err != nil {
		return nil, nil, nil, firstErr(err, free())
	}
	if child, err = b.startChild(ctx, srv, filepath.Join(dir, "worker"), extra...); err != nil {
		return nil, nil, nil, firstErr(err, free())
	}
	return srv, child, func() error { child.kill(); return free() }, nil
}

// fileSize returns the size of a file, 0 when it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
