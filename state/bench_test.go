package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/state"
)

// BenchmarkApply applies batches of 100 events over 10,000 tenants and
// reports the cost per event: every event a change, every other one
// unchanged (a newer event with the same status), or none changed. "sync"
// fsyncs each commit as the projector does; "nosync" is a rebuild.
// "outbox" writes the changes into the change outbox as the worker does,
// and after each batch takes them out again as the change feed does once
// the stream acknowledged them. "deadlines" sets SLOs under which every
// change moves the tenant's deadline (running 30 minutes, a 2-hour run).
func BenchmarkApply(b *testing.B) {
	for _, sync := range []string{"sync", "nosync"} {
		for _, mix := range []string{"changes", "half-unchanged", "unchanged"} {
			b.Run(sync+"/"+mix, func(b *testing.B) { benchApply(b, sync == "sync", mix, false, false) })
		}
	}
	b.Run("sync/changes/outbox", func(b *testing.B) { benchApply(b, true, "changes", true, false) })
	b.Run("nosync/changes/outbox", func(b *testing.B) { benchApply(b, false, "changes", true, false) })
	b.Run("nosync/changes/deadlines", func(b *testing.B) { benchApply(b, false, "changes", false, true) })
}

func benchApply(b *testing.B, sync bool, mix string, outbox, deadlines bool) {
	const tenants, batchSize = 10000, 100
	db := openDB(b, func(db *state.DB) { db.NoSync, db.ChangeOutbox = !sync, outbox })
	if deadlines {
		db.SetSLOs(testSLOs(b))
	}
	drain := func() {
		if outbox {
			drainOutbox(b, db, batchSize)
		}
	}
	s := newStream(b, db)
	revs := make([]substate.Revision, tenants)
	ids, execs := make([]string, tenants), make([]string, tenants)
	for i := range tenants {
		ids[i], execs[i] = tenantID(i), "exec-"+tenantID(i)
	}
	base := ev("", "", running, 0)
	next := func(i int) substate.EventData {
		revs[i]++
		e := base
		e.TenantID, e.ExecutionID, e.Revision = ids[i], execs[i], revs[i]
		e.OccurredAt = t0.Add(time.Duration(revs[i]) * time.Second)
		e.RetryCountKnown = true
		if mix == "changes" && revs[i]%2 == 0 || mix == "half-unchanged" && (int(revs[i])+i)%4 >= 2 {
			e.SubState, e.Verb, e.Status = backingOff, substate.VerbRetrying, substate.StatusRunning
			e.RetryCount, e.ErrorMessage = 1, "boom"
		}
		return e
	}
	for lo := 0; lo < tenants; lo += 1000 {
		var evs []substate.EventData
		for i := lo; i < lo+1000; i++ {
			evs = append(evs, next(i))
		}
		s.apply(evs...)
		for range 10 {
			drain()
		}
	}
	events, batch := 0, make([]substate.EventData, batchSize)
	b.ReportAllocs()
	for b.Loop() {
		for j := range batch {
			batch[j] = next(events % tenants)
			events++
		}
		s.apply(batch...)
		drain()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(db.Stats().Commits)/float64(events/batchSize), "commits/batch")
}

func BenchmarkTenant(b *testing.B) {
	db := openDB(b, fast)
	population(b, db, 10000)
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.Tenant(ctx, tenantID(i%10000)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkTenants lists the first page of 100 and a page deep into the
// listing for each filter over 10,000 tenants.
func BenchmarkTenants(b *testing.B) {
	db := openDB(b, fast)
	population(b, db, 10000)
	ctx := context.Background()
	for _, tc := range filters {
		f := tc.f
		f.Limit = 100
		b.Run(tc.name+"/first", func(b *testing.B) { benchList(b, db, f) })
		deep := f
		for range 10 {
			page, err := db.Tenants(ctx, deep)
			if err != nil {
				b.Fatal(err)
			}
			if page.NextPageToken == "" {
				break
			}
			deep.PageToken = page.NextPageToken
		}
		if deep.PageToken != "" {
			b.Run(tc.name+"/page10", func(b *testing.B) { benchList(b, db, deep) })
		}
	}
}

func benchList(b *testing.B, db *state.DB, f substate.TenantFilter) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.Tenants(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkActive walks every non-terminal tenant of 10,000.
func BenchmarkActive(b *testing.B) {
	db := openDB(b, fast)
	population(b, db, 10000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range db.Active(ctx, t0.AddDate(1, 0, 0)) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRecordCodec compares the stored encoding with JSON of the same
// record.
func BenchmarkRecordCodec(b *testing.B) {
	rec := sampleRecords()[1]
	rec.View.WorkflowExecutionID = "arn:aws:states:eu-west-1:123456789012:execution:provision:tenant-00042-7f3a"
	rec.ExecutionID = rec.View.WorkflowExecutionID
	enc := state.EncodeRecord(rec)
	js, _ := json.Marshal(rec)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			state.EncodeRecord(rec)
		}
		b.ReportMetric(float64(len(enc)), "bytes")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := state.DecodeRecord("t", enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(rec)
		}
		b.ReportMetric(float64(len(js)), "bytes")
	})
	b.Run("json-decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r state.Record
			if err := json.Unmarshal(js, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGroupMigration opens a view of 100,000 tenants written before
// the group buckets existed (schema 1), which builds them from its
// records, and reports the cost per tenant.
func BenchmarkGroupMigration(b *testing.B) {
	const tenants = 100_000
	db := openDB(b, func(db *state.DB) { db.NoSync = true })
	faultPopulationFast(b, db, tenants)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := state.ForgetGroups(db.Path); err != nil {
			b.Fatal(err)
		}
		if err := db.Open(); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tenants), "ns/tenant")
}

// faultPopulationFast applies n tenants with faults, steps and workflow
// types in large batches.
func faultPopulationFast(tb testing.TB, db *state.DB, n int) {
	tb.Helper()
	s := newStream(tb, db)
	batch := make([]substate.EventData, 0, 5000)
	for i := range n {
		st := substate.SubStates[i%len(substate.SubStates)]
		opts := []evOpt{provider(providerOf(i)), step(fmt.Sprintf("Step%d", i%20)), workflow(fmt.Sprintf("wf-%d", i%8))}
		if st == backingOff || st == errored || st == failed {
			opts = append(opts, fault("boom", "T", fmt.Sprintf("engine/t/fault %d", i%300)))
		}
		batch = append(batch, ev(fmt.Sprintf("tenant-%07d", i), "x", st, 1, opts...))
		if len(batch) == cap(batch) {
			s.apply(batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		s.apply(batch...)
	}
}

// BenchmarkApplySmallBatches is the projector at a moderate rate over a
// large view: fsynced batches of 8 events, each of a random tenant of
// 100,000 whose record and index keys sit on pages no other event of the
// batch dirties, with the change outbox drained as the feed drains it. It
// reports the bytes each event's commit writes and the process's CPU per
// event beside its time.
func BenchmarkApplySmallBatches(b *testing.B) {
	const tenants, batchSize = 100000, 8
	db := openDB(b, func(db *state.DB) { db.ChangeOutbox = true })
	s := newStream(b, db)
	revs := make([]substate.Revision, tenants)
	ids := make([]string, tenants)
	for i := range tenants {
		ids[i] = tenantID(i)
	}
	next := func(i int) substate.EventData {
		revs[i]++
		e := ev(ids[i], "exec-"+ids[i], running, revs[i])
		e.OccurredAt = t0.Add(time.Duration(revs[i]) * time.Second)
		if revs[i]%2 == 0 {
			e.SubState, e.Verb, e.Status = backingOff, substate.VerbRetrying, substate.StatusRunning
			e.RetryCount, e.RetryCountKnown, e.ErrorMessage = 1, true, "boom"
		}
		return e
	}
	drain := func() { drainOutbox(b, db, 1<<16) }
	for lo := 0; lo < tenants; lo += 5000 {
		evs := make([]substate.EventData, 0, 5000)
		for i := lo; i < lo+5000; i++ {
			evs = append(evs, next(i))
		}
		s.apply(evs...)
		drain()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	written0, cpu0 := db.Stats().BytesWritten, cputime.Process()
	events, batch := 0, make([]substate.EventData, batchSize)
	b.ReportAllocs()
	for b.Loop() {
		for j := range batch {
			batch[j] = next(rng.IntN(tenants))
			events++
		}
		s.apply(batch...)
		drain()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(db.Stats().BytesWritten-written0)/float64(events), "bytes/event")
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(events), "cpu-µs/event")
}

// drainOutbox takes up to n changes out of the outbox as the change feed
// does once the stream has them.
func drainOutbox(b *testing.B, db *state.DB, n int) {
	ctx := context.Background()
	pending, err := db.PendingChanges(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	if err := db.RemoveChanges(ctx, pending); err != nil {
		b.Fatal(err)
	}
}
