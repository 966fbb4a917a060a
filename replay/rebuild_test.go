package replay_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
)

// TestRebuildEqualsLive is the property: for a random stream with
// duplicates and reordering, the view the live projector keeps equals the
// view a rebuild folds from the stream.
func TestRebuildEqualsLive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(round)))
		b := newBus(t, bus.DefaultTopology())
		live := openView(t, "live.db")
		runProjector(t, b, live)
		events := randomEvents(r, 50+r.IntN(250))
		for len(events) > 0 { // in bursts, so that live batches vary
			n := min(len(events), 1+r.IntN(40))
			publish(t, b, events[:n]...)
			events = events[n:]
		}
		waitApplied(t, live, lastSeq(t, b))

		rebuilt, p := rebuild(t, b, replay.Range{})
		if diffs := replay.Compare(allTenants(t, live), allTenants(t, rebuilt)); len(diffs) > 0 {
			t.Fatalf("seed %d round %d: rebuilt view differs from the live one: %+v", seed, round, diffs)
		}
		if got, want := rebuilt.Applied(), lastSeq(t, b); got != want {
			t.Errorf("rebuilt view applied %d, want %d", got, want)
		}
		if p.Events == 0 || p.Changes == 0 {
			t.Errorf("progress %+v counts nothing", p)
		}
	}
}

// TestRebuildUntilSeqEqualsLiveAtSeq checks the view as of a past point: a
// rebuild up to sequence N equals the live view when it had applied N.
func TestRebuildUntilSeqEqualsLiveAtSeq(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	b := newBus(t, bus.DefaultTopology())
	live := openView(t, "live.db")
	runProjector(t, b, live)
	publish(t, b, randomEvents(r, 150)...)
	n := lastSeq(t, b)
	waitApplied(t, live, n)
	atN := allTenants(t, live)
	publish(t, b, randomEvents(r, 150)...)
	waitApplied(t, live, lastSeq(t, b))

	rebuilt, p := rebuild(t, b, replay.Range{ToSeq: n})
	if diffs := replay.Compare(atN, allTenants(t, rebuilt)); len(diffs) > 0 {
		t.Fatalf("seed %d: view rebuilt up to %d differs from the live view at %d: %+v", seed, n, n, diffs)
	}
	if p.Seq != n || rebuilt.Applied() != n {
		t.Fatalf("rebuild read up to %d and applied %d, want %d", p.Seq, rebuilt.Applied(), n)
	}
}

// TestRebuildIsDeterministic checks that two rebuilds agree on every field,
// updatedAt included: the rebuild's clock is the stream's.
func TestRebuildIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := newBus(t, bus.DefaultTopology())
	publish(t, b, randomEvents(r, 200)...)
	one, _ := rebuild(t, b, replay.Range{})
	two, _ := rebuild(t, b, replay.Range{})
	a, c := allTenants(t, one), allTenants(t, two)
	if len(a) != len(c) || len(a) == 0 {
		t.Fatalf("%d and %d tenants", len(a), len(c))
	}
	for i := range a {
		if a[i] != c[i] {
			t.Errorf("tenant %s: %+v, then %+v", a[i].TenantID, a[i], c[i])
		}
		if a[i].UpdatedAt.IsZero() {
			t.Errorf("tenant %s has no updatedAt", a[i].TenantID)
		}
	}
}

// TestRebuildLeavesOutInvalidMessages checks that a message the projector
// would dead-letter is skipped and counted, as the projector does.
func TestRebuildLeavesOutInvalidMessages(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	r := rand.New(rand.NewPCG(3, 4))
	publish(t, b, randomEvents(r, 5)...)
	publishMsg(t, b.JetStream, substate.EventsSubject("tenant-1"), []byte("not json"), nil)
	publish(t, b, randomEvents(r, 5)...)
	_, p := rebuild(t, b, replay.Range{})
	if p.Invalid != 1 || p.Events != 10 || p.Seq != 11 {
		t.Fatalf("progress %+v, want 10 events and 1 invalid up to 11", p)
	}
}

func TestRebuildEmptyStream(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	db, p := rebuild(t, b, replay.Range{})
	if p.Events != 0 || len(allTenants(t, db)) != 0 {
		t.Fatalf("progress %+v", p)
	}
	if _, err := db.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
}
