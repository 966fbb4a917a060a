package state_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the property tests (0: from the clock)")

// TestFoldProperty checks what the view promises about event order. A
// world is a population of tenants whose executions follow random but
// plausible lifecycles (errors, back-offs, retries, waits, redrives after
// failure, newer executions replacing older ones). Its in-order stream
// (each tenant's executions by age, each execution's events by revision)
// is folded into a reference view; a perturbed stream of the same events,
// with duplicates, applied in random batches with redeliveries and
// restarts, must fold to:
//
//   - exactly what the pure rule function gives for that stream, in every
//     mode (the store adds nothing to the rules: batching, pending
//     unchanged events, restarts and redeliveries are invisible);
//   - "per-execution order": the reference view, entirely, when each
//     execution's events keep their order and only interleave with other
//     executions and tenants (JetStream keeps a subject's order; the
//     Restate poller and the engine report one execution in order), even
//     with inferred retry counts and failure events without messages;
//   - "self-describing": the reference view, entirely, under any reordering
//     (Step Functions events through EventBridge), when every event reports
//     its retry count and every error, backing-off and failed event carries
//     its message;
//   - "inferred": otherwise, under any reordering, the reference view's
//     execution, sub-state, verb, status, provider, provider state and last
//     event time, which the newest event decides alone. The retry count and
//     error message can differ: an inferred retry is counted on an observed
//     error/backing-off → running transition, and a reordered stream can
//     make the error event stale (it arrives after the running that
//     followed it) or skip events between the two; a failure event without
//     a message keeps the one before it, which reordering can also skip.
//     The error type and fingerprint move with the message.
//
// Under any reordering the time the tenant entered its sub-state is not
// promised either: the event that began the sub-state can arrive after a
// later event of the same sub-state and be stale, so the view shows the
// later event's time (never one before the true time); nor is the step,
// which an event that names none keeps. UpdatedAt is the
// wall-clock time of a change and is not compared.
func TestFoldProperty(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	for _, m := range []mode{modePerExecution, modeSelfDescribing, modeInferred} {
		t.Run(m.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(m.id)))
			for world := range 60 {
				checkWorld(t, r, m, world)
				if t.Failed() {
					t.Fatalf("world %d failed (seed %d)", world, seed)
				}
			}
		})
	}
}

// mode is a kind of world and perturbation.
type mode struct {
	id      int
	name    string
	known   bool // events report their retry count
	sparse  bool // failure events may omit their message
	shuffle bool // any reordering; else each execution keeps its order
}

var (
	modePerExecution   = mode{1, "PerExecutionOrder", false, true, false}
	modeSelfDescribing = mode{2, "SelfDescribingReordered", true, false, true}
	modeInferred       = mode{3, "InferredReordered", false, true, true}
)

func checkWorld(t *testing.T, r *rand.Rand, m mode, world int) {
	executions := genWorld(r, m)
	ordered := slices.Concat(executions...)
	perturbed := perturb(r, executions, m.shuffle)

	ref := openDB(t, fast)
	deliver(t, r, ref, sequence(ordered), false)
	got := openDB(t, fast, func(db *state.DB) { db.PendingLimit = 1 + r.IntN(40) })
	deliveries := deliver(t, r, got, sequence(perturbed), true)

	gotViews, refViews := allViews(t, got), allViews(t, ref)
	memViews := foldMemory(deliveries)
	if len(gotViews) != len(memViews) {
		t.Fatalf("world %d: %d tenants, pure fold has %d", world, len(gotViews), len(memViews))
	}
	for i, v := range gotViews {
		if want := memViews[i]; v != want {
			t.Errorf("world %d: store and pure fold differ:\n got  %+v\n want %+v", world, v, want)
		}
		promised, want := promise(m, v), promise(m, refViews[i])
		if promised != want {
			t.Errorf("world %d, %s: perturbed stream folds to\n %+v\nin-order stream to\n %+v", world, v.TenantID, promised, want)
		}
	}
}

func fast(db *state.DB) { db.NoSync = true }

// promise keeps the fields a mode promises to match the in-order fold.
func promise(m mode, v substate.TenantView) substate.TenantView {
	v.UpdatedAt = time.Time{}
	if m.shuffle {
		v.WorkflowSubStateSince, v.WorkflowStep = time.Time{}, ""
	}
	if m == modeInferred {
		v.WorkflowRetryCount, v.WorkflowErrorMessage = 0, ""
		v.WorkflowErrorType, v.WorkflowErrorFingerprint = "", ""
	}
	return v
}

// genWorld returns each execution's events in revision order, executions
// in the in-order stream's order: by tenant, then start time and id.
func genWorld(r *rand.Rand, m mode) [][]substate.EventData {
	var out [][]substate.EventData
	for i := range 6 + r.IntN(20) {
		type exec struct {
			id    string
			start time.Time
		}
		var execs []exec
		for j := range 1 + r.IntN(3) {
			execs = append(execs, exec{fmt.Sprintf("e%d", j), t0.Add(time.Duration(r.IntN(3)) * time.Hour)})
		}
		slices.SortFunc(execs, func(a, b exec) int { return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.id, b.id)) })
		for _, x := range execs {
			out = append(out, genExecution(r, m, tenantID(i), x.id, x.start))
		}
	}
	return out
}

// next sub-states a lifecycle may take from each one.
var lifecycle = map[substate.SubState][]substate.SubState{
	running:    {running, running, waiting, errored, backingOff, backingOff, succeeded, failed},
	waiting:    {running, running, waiting, failed},
	errored:    {backingOff, running, failed, errored},
	backingOff: {running, running, errored, backingOff, failed},
	failed:     {waiting, running}, // a redrive
}

// genExecution returns one execution's events: a random walk of its
// sub-state with strictly increasing revisions.
func genExecution(r *rand.Rand, m mode, tenant, id string, start time.Time) []substate.EventData {
	var out []substate.EventData
	s, count := running, 0
	for i := range 2 + r.IntN(10) {
		e := ev(tenant, id, s, substate.Revision(i+1), started(start), native([]string{"a", "b"}[r.IntN(2)]))
		if m.known {
			e.RetryCount, e.RetryCountKnown = count, true
		}
		failure := s == errored || s == backingOff || s == failed
		if (failure && (!m.sparse || r.IntN(2) == 0)) || (s == waiting && r.IntN(3) == 0) {
			e.ErrorMessage = fmt.Sprintf("%s failure %d", id, i)
			e.ErrorType = []string{"Timeout", "Declined"}[r.IntN(2)]
			e.ErrorFingerprint = fmt.Sprintf("engine/%s/%s failure", e.ErrorType, id)
		}
		e.Workflow = "wf-" + id // every event of an execution names its workflow
		if r.IntN(4) == 0 {
			e.Step = []string{"Charge", "Ship"}[r.IntN(2)]
		}
		if s == failed && r.IntN(4) == 0 {
			e.Verb = substate.VerbCancelled
		}
		out = append(out, e)
		if s == succeeded || (s == failed && r.IntN(2) == 0) {
			break
		}
		next := lifecycle[s][r.IntN(len(lifecycle[s]))]
		if (s == errored || s == backingOff) && next == running {
			// Counts only grow: a count a provider restarts (Restate after
			// a resume) is never taken below the view's, so the view keeps
			// the highest count among the events that applied, and under
			// reordering which ones apply depends on the order.
			count++
		}
		s = next
	}
	return out
}

// perturb interleaves the executions' events at random, each execution
// keeping its order unless shuffle, and adds duplicates: anywhere when
// shuffling, else after the original (a redelivery).
func perturb(r *rand.Rand, executions [][]substate.EventData, shuffle bool) []substate.EventData {
	var out []substate.EventData
	queues := slices.Clone(executions)
	for len(queues) > 0 {
		i := r.IntN(len(queues))
		out = append(out, queues[i][0])
		if queues[i] = queues[i][1:]; len(queues[i]) == 0 {
			queues = slices.Delete(queues, i, i+1)
		}
	}
	for i := len(out) - 1; i >= 0; i-- {
		if r.IntN(6) == 0 {
			at := i + 1 + r.IntN(len(out)-i)
			out = slices.Insert(out, at, out[i])
		}
	}
	if shuffle {
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

func sequence(evs []substate.EventData) []substate.Sequenced {
	out := make([]substate.Sequenced, len(evs))
	for i, e := range evs {
		out[i] = substate.Sequenced{Seq: uint64(i + 1), Event: e}
	}
	return out
}

// deliver applies the stream in random batches and returns every message
// delivered. With chaos, a batch is sometimes delivered again (a lost ack)
// and the view is sometimes closed and reopened (a restart).
func deliver(t *testing.T, r *rand.Rand, db *state.DB, stream []substate.Sequenced, chaos bool) []substate.Sequenced {
	t.Helper()
	var delivered []substate.Sequenced
	for len(stream) > 0 {
		batch := stream[:min(1+r.IntN(12), len(stream))]
		stream = stream[len(batch):]
		for range 1 + btoi(chaos && r.IntN(8) == 0) {
			before := db.Stats()
			res := mustApply(t, db, batch)
			checkResult(t, batch, res, before, db.Stats())
			delivered = append(delivered, batch...)
		}
		if chaos && r.IntN(20) == 0 {
			reopen(t, db)
		}
	}
	return delivered
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkResult checks that a result accounts for every event and that only
// a change, or the pending limit, committed.
func checkResult(t *testing.T, batch []substate.Sequenced, res substate.ApplyResult, before, after state.Stats) {
	t.Helper()
	if n := len(res.Changes) + res.Unchanged + res.Stale + res.Skipped; n != len(batch) {
		t.Errorf("result accounts for %d of %d events: %+v", n, len(batch), res)
	}
	commits := after.Commits - before.Commits
	if res.Committed != (commits == 1) || commits > 1 {
		t.Errorf("committed %t but %d commits", res.Committed, commits)
	}
	if len(res.Changes) > 0 && !res.Committed {
		t.Errorf("%d changes without a commit", len(res.Changes))
	}
	if len(res.Changes) == 0 && res.Committed && after.Pending != 0 {
		t.Errorf("a batch without changes committed with %d still pending", after.Pending)
	}
}

// foldMemory folds delivered messages with the pure rule function, skipping
// sequences already applied, and returns the views by tenant id.
func foldMemory(delivered []substate.Sequenced) []substate.TenantView {
	recs := map[string]state.Record{}
	var last uint64
	for _, s := range delivered {
		if s.Seq <= last {
			continue
		}
		last = s.Seq
		recs[s.Event.TenantID], _ = state.ApplyEvent(recs[s.Event.TenantID], s.Event, t0)
	}
	views := make([]substate.TenantView, 0, len(recs))
	for _, rec := range recs {
		views = append(views, rec.View)
	}
	slices.SortFunc(views, func(a, b substate.TenantView) int { return cmp.Compare(a.TenantID, b.TenantID) })
	return views
}

func allViews(t *testing.T, db *state.DB) []substate.TenantView {
	t.Helper()
	page, err := db.Tenants(context.Background(), substate.TenantFilter{Limit: db.MaxLimit})
	if err != nil || page.NextPageToken != "" {
		t.Fatalf("list all: %v, next %q", err, page.NextPageToken)
	}
	return page.Tenants
}
