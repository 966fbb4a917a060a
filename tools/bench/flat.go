package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/worker"
)

// flatRow is the cost after a number of events of the flat-cost scenario.
type flatRow struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	WorkerRSSMiB float64 `json:"workerRssMiB"` // the worker, a child process
	ServerRSSMiB float64 `json:"serverRssMiB"` // the bench's process: the NATS server and the load generator
	// HeapLiveMiB is the bench process's live Go heap after a collection:
	// what the NATS server and the load generator hold, without the
	// garbage and free pages the runtime keeps between collections.
	HeapLiveMiB float64 `json:"heapLiveMiB"`
	// GoHeldMiB is the memory the bench process's Go runtime holds from
	// the operating system, live or not.
	GoHeldMiB     float64 `json:"goHeldMiB"`
	ViewFileMiB   float64 `json:"viewFileMiB"`
	RawMiBPerM    float64 `json:"rawMiBPerMillion"`    // SUBSTATE_RAW bytes per million events
	EventsMiBPerM float64 `json:"eventsMiBPerMillion"` // SUBSTATE_EVENTS bytes per million events
}

// FlatReport is the flat-cost scenario's report.
type FlatReport struct {
	Tenants      int       `json:"tenants"`
	DedupeWindow string    `json:"dedupeWindow"`
	Rows         []flatRow `json:"rows"`
}

// FlatRows is how many times the flat-cost scenario measures: often enough
// to see a trend on a slow machine that fits only part of --flat in its
// time limit.
const FlatRows = 50

// flat sends --flat events in FlatRows chunks (or as many as fit --flat-limit)
// to a worker in a child process on the bench's NATS server, and after
// each chunk, once the view has applied it, measures both processes'
// resident memory, the view file and the streams.
func (b *benchRun) flat(ctx context.Context, progress func(string)) (_ *FlatReport, err error) {
	load := b.load
	load.tenants = max(min(b.Tenants, b.Flat/FlatRows), 1)
	chunk := max(b.Flat/FlatRows/load.tenants, 1) * load.tenants
	srv, child, closeRun, err := b.openChildRun(ctx, "flat")
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, closeRun()) }()
	rep := &FlatReport{Tenants: load.tenants}
	s := &sender{pub: publishers.NewJetStream(srv.JetStream), load: load, inflight: 2048}
	start := time.Now()
	var deadline <-chan time.Time // none: every event
	if b.FlatLimit > 0 {
		deadline = time.After(b.FlatLimit)
	}
	for sent, over := 0, false; sent < b.Flat && !over; {
		n := min(chunk, b.Flat-sent)
		done, err := s.send(ctx, load.changes(n, sent/load.tenants), deadline)
		if err != nil {
			return nil, err
		}
		sent, over = sent+done, done < n
		if done == 0 {
			break // the time limit passed at a chunk's boundary: measured already
		}
		if err := child.waitApplied(ctx, uint64(sent), benchIdle); err != nil {
			return nil, err
		}
		row, err := measureFlat(ctx, srv, child, sent, time.Since(start))
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
		progress(fmt.Sprintf("flat cost: %d events, worker %.0f MiB, server %.0f MiB (Go heap %.0f MiB live, %.0f MiB held)", sent,
			row.WorkerRSSMiB, row.ServerRSSMiB, row.HeapLiveMiB, row.GoHeldMiB))
	}
	// The window the streams kept, as the server has it: a worker on other
	// settings would have changed it.
	st, err := srv.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		return nil, err
	}
	rep.DedupeWindow = st.CachedInfo().Config.Duplicates.String()
	if b.MemProfile != "" {
		if err := writeHeapProfile(b.MemProfile); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// measureFlat reads the cost after sent events.
func measureFlat(ctx context.Context, srv *bus.Bus, child *childWorker, sent int, elapsed time.Duration) (flatRow, error) {
	live, held := goMemory()
	row := flatRow{Events: sent, Seconds: elapsed.Seconds(), WorkerRSSMiB: mib(child.memory().rss), ServerRSSMiB: mib(readMemory().rss),
		HeapLiveMiB: mib(live), GoHeldMiB: mib(held), ViewFileMiB: mib(uint64(fileSize(filepath.Join(child.dir, worker.ViewFile("")))))}
	perM := float64(sent) / 1e6
	for _, s := range []struct {
		name string
		to   *float64
	}{{substate.StreamRaw, &row.RawMiBPerM}, {substate.StreamEvents, &row.EventsMiBPerM}} {
		st, err := srv.JetStream.Stream(ctx, s.name)
		if err != nil {
			return row, err
		}
		*s.to = mib(st.CachedInfo().State.Bytes) / perM
	}
	return row, nil
}

// print writes the flat-cost table.
func (r *FlatReport) print(w io.Writer) {
	fmt.Fprintf(w, "flat cost: %d tenants, duplicate window %s\n", r.Tenants, r.DedupeWindow)
	fmt.Fprintf(w, "%12s %8s %12s %12s %12s %12s %10s %14s %14s\n", "events", "seconds", "worker RSS", "server RSS", "live heap", "Go held", "view", "raw/M events", "events/M")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%12d %8.0f %8.0f MiB %8.0f MiB %8.0f MiB %8.0f MiB %6.0f MiB %10.0f MiB %10.0f MiB\n", row.Events, row.Seconds,
			row.WorkerRSSMiB, row.ServerRSSMiB, row.HeapLiveMiB, row.GoHeldMiB, row.ViewFileMiB, row.RawMiBPerM, row.EventsMiBPerM)
	}
}

// goMemory collects garbage and returns the bytes of live heap objects
// and the bytes the Go runtime holds from the operating system (mapped and
// not returned: the live heap, garbage not yet reused, stacks, metadata).
func goMemory() (live, held uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 0, 0
		}
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64() - s[2].Value.Uint64()
}
