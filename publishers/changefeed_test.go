package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
)

var errCrash = errors.New("crash")

// feedWorld is a view with a change outbox and the stream it drains into.
type feedWorld struct {
	tb    testing.TB
	b     *bus.Bus
	db    *state.DB
	feed  func() *publishers.ChangeFeed
	rng   *rand.Rand
	seq   uint64
	rev   map[string]substate.Revision
	state map[string]substate.SubState
	want  []substate.Change // every change the view committed, in commit order
}

func newFeedWorld(tb testing.TB, seed uint64) *feedWorld {
	tb.Helper()
	b := bustest.Open(tb)
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	db.ChangeOutbox = true
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return &feedWorld{tb: tb, b: b, db: db, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		rev: map[string]substate.Revision{}, state: map[string]substate.SubState{},
		feed: func() *publishers.ChangeFeed {
			return &publishers.ChangeFeed{JetStream: b.JetStream, Outbox: db, Window: 16, AckTimeout: 30 * time.Second}
		}}
}

var feedStates = []substate.SubState{substate.StateRunning, substate.StateWaiting, substate.StateBackingOff, substate.StateError}

// commit applies a random batch of events of a few tenants (most of them
// changes, some not) and records the changes the view committed.
func (w *feedWorld) commit() {
	w.tb.Helper()
	batch := make([]substate.Sequenced, 1+w.rng.IntN(6))
	for i := range batch {
		tenant := fmt.Sprintf("tenant %d.x", w.rng.IntN(5)) // not a plain subject token
		w.rev[tenant]++
		s := feedStates[w.rng.IntN(len(feedStates))]
		w.seq++
		batch[i] = substate.Sequenced{Seq: w.seq, Event: substate.EventData{
			TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "e1", Workflow: "w",
			SubState: s, ProviderState: string(s), Revision: w.rev[tenant],
			OccurredAt:         time.Date(2026, 1, 1, 0, 0, int(w.rev[tenant]), 0, time.UTC),
			ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}}
	}
	res, err := w.db.Apply(context.Background(), batch)
	if err != nil {
		w.tb.Fatal(err)
	}
	w.want = append(w.want, res.Changes...)
}

// TestChangeFeedCrash commits changes and drains the outbox in a loop,
// abandoning the drain at a random point of its round each time, as a
// worker killed between its commit and the publish acknowledgement
// would: before anything was sent, after some of the round was sent,
// after every acknowledgement but before the outbox forgot them. A fresh
// ChangeFeed (the restarted worker) takes over each time. In the end the
// stream holds every committed change exactly once, in per-tenant order.
//
// SUBSTATE_SOAK_CYCLES sets more cycles (make soak).
func TestChangeFeedCrash(t *testing.T) {
	cycles := soakCycles(t, "SUBSTATE_SOAK_CYCLES", 250)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	w := newFeedWorld(t, seed)
	ctx := context.Background()
	crashes := map[string]int{}
	for range cycles {
		w.commit()
		f := w.feed()
		calls, at := 0, w.rng.IntN(7) // crash at the at-th step of the drain
		publishers.SetFault(f, func(step string, _ int) error {
			if calls++; calls > at {
				crashes[step]++
				return errCrash
			}
			return nil
		})
		for {
			n, err := f.Drain(ctx)
			if errors.Is(err, errCrash) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
	}
	t.Logf("%d changes committed; crashes %v", len(w.want), crashes)
	if crashes[publishers.StepPublishing] == 0 || crashes[publishers.StepAcked] == 0 ||
		crashes[publishers.StepPublishing]+crashes[publishers.StepAcked] < cycles*4/5 {
		t.Fatalf("crashes %v in %d cycles: want four in five, at both steps", crashes, cycles)
	}
	drainAll(t, w.feed(), w.db)
	checkFeed(t, w.b.JetStream, w.want)
}

// TestChangeFeedRound checks what one round publishes: the oldest change
// of every tenant in the window, not only those before the first tenant
// that repeats, and each tenant's later change in the next round.
func TestChangeFeedRound(t *testing.T) {
	w := newFeedWorld(t, 1)
	apply := func(tenant string, s substate.SubState) {
		w.seq++
		w.rev[tenant]++
		res, err := w.db.Apply(context.Background(), []substate.Sequenced{{Seq: w.seq, Event: substate.EventData{
			TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "e1", Workflow: "w",
			SubState: s, ProviderState: string(s), Revision: w.rev[tenant],
			OccurredAt:         time.Date(2026, 1, 1, 0, 0, int(w.rev[tenant]), 0, time.UTC),
			ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}}})
		if err != nil || len(res.Changes) != 1 {
			t.Fatalf("apply %s %s: %d changes, %v", tenant, s, len(res.Changes), err)
		}
		w.want = append(w.want, res.Changes...)
	}
	apply("a", substate.StateRunning)
	apply("b", substate.StateRunning)
	apply("a", substate.StateBackingOff)
	apply("c", substate.StateRunning)
	apply("a", substate.StateRunning)
	f := w.feed()
	for i, want := range []int{3, 1, 1, 0} {
		n, err := f.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("round %d published %d changes, want %d", i+1, n, want)
		}
	}
	checkFeed(t, w.b.JetStream, w.want)
}

// TestChangeFeedKilledAfterAck: a worker killed after the feed's
// acknowledgements, before the view's next commit deleted them from the
// outbox, publishes those changes again after the restart, and the
// stream stores none of them twice. The killed worker's view is a copy
// of its file taken while it runs: what a kill -9 leaves on disk.
func TestChangeFeedKilledAfterAck(t *testing.T) {
	w := newFeedWorld(t, 2)
	for range 5 {
		w.commit()
	}
	drainAll(t, w.feed(), w.db)
	killed := filepath.Join(t.TempDir(), "view.db")
	b, err := os.ReadFile(w.db.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(killed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db := state.NewDB(killed)
	db.ChangeOutbox = true
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.OutboxLen()
	if err != nil || n != len(w.want) {
		t.Fatalf("the killed worker's outbox holds %d changes (%v), want the %d published", n, err, len(w.want))
	}
	drainAll(t, &publishers.ChangeFeed{JetStream: w.b.JetStream, Outbox: db}, db)
	checkFeed(t, w.b.JetStream, w.want)
}

// drainAll drains the outbox until it is empty.
func drainAll(tb testing.TB, f *publishers.ChangeFeed, db *state.DB) {
	tb.Helper()
	for {
		n, err := f.Drain(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n, err := db.OutboxLen(); err != nil || n != 0 {
		tb.Fatalf("outbox holds %d changes after draining (%v)", n, err)
	}
}

// checkFeed checks that SUBSTATE_CHANGES holds exactly the changes want,
// each once, on its subject with its sequence as message id, and each
// tenant's in the order the view committed them.
func checkFeed(tb testing.TB, js jetstream.JetStream, want []substate.Change) {
	tb.Helper()
	feed := bustest.Changes(tb, js)
	wantBySeq := make(map[uint64]substate.Change, len(want))
	wantOrder := map[string][]uint64{}
	for _, c := range want {
		wantBySeq[c.Seq] = c
		wantOrder[c.TenantID] = append(wantOrder[c.TenantID], c.Seq)
	}
	seen := map[uint64]bool{}
	gotOrder := map[string][]uint64{}
	for _, fc := range feed {
		m, c := fc.Msg, fc.Change
		seen[c.Seq] = true
		w, ok := wantBySeq[c.Seq]
		switch {
		case !ok:
			tb.Errorf("change %d is in the feed but was never committed", c.Seq)
		case m.Subject != substate.ChangeSubject(&w) || m.Header.Get(substate.HeaderMsgID) != substate.ChangeMsgID(&w):
			tb.Errorf("change %d on %s with id %q", c.Seq, m.Subject, m.Header.Get(substate.HeaderMsgID))
		case c.New.WorkflowSubState != w.New.WorkflowSubState || c.Old.WorkflowSubState != w.Old.WorkflowSubState:
			tb.Errorf("change %d is %+v, want %+v", c.Seq, c, w)
		}
		gotOrder[c.TenantID] = append(gotOrder[c.TenantID], c.Seq)
	}
	for _, c := range want {
		if !seen[c.Seq] {
			tb.Errorf("change %d (tenant %q) was committed but is not in the feed", c.Seq, c.TenantID)
		}
	}
	for tenant, order := range wantOrder {
		if fmt.Sprint(gotOrder[tenant]) != fmt.Sprint(order) {
			tb.Errorf("tenant %q: feed order %v, want %v", tenant, gotOrder[tenant], order)
		}
	}
	if len(feed) != len(want) {
		tb.Errorf("feed holds %d messages, want %d", len(feed), len(want))
	}
}

// soakCycles returns the number in the environment variable name, or def.
func soakCycles(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// TestChangeFeedRoundWithARefusal: a change the stream refuses in the
// middle of a round stays in the outbox, and the changes on either side
// of it, which the stream stored, leave it.
func TestChangeFeedRoundWithARefusal(t *testing.T) {
	ctx := context.Background()
	w := newFeedWorld(t, 2)
	s, err := w.b.JetStream.Stream(ctx, substate.StreamChanges)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = 8 << 10
	if _, err := w.b.JetStream.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var committed []substate.Change
	for i, tenant := range []string{"a", "b", "c"} {
		msg := "small"
		if tenant == "b" {
			msg = strings.Repeat("too large for the stream ", 600)
		}
		res, err := w.db.Apply(ctx, []substate.Sequenced{{Seq: uint64(i + 1), Event: substate.EventData{
			TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "e1", Workflow: "w",
			SubState: substate.StateError, ProviderState: "error", ErrorMessage: msg, Revision: 1,
			OccurredAt:         time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
			ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}}})
		if err != nil || len(res.Changes) != 1 {
			t.Fatalf("apply %s: %d changes, %v", tenant, len(res.Changes), err)
		}
		committed = append(committed, res.Changes...)
	}
	n, err := w.feed().Drain(ctx)
	if err == nil || n != 2 {
		t.Fatalf("round stored %d changes with error %v, want 2 and the refusal", n, err)
	}
	left, err := w.db.PendingChanges(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].TenantID != "b" {
		t.Fatalf("outbox keeps %d changes (%+v), want b's alone", len(left), left)
	}
	checkFeed(t, w.b.JetStream, []substate.Change{committed[0], committed[2]})
}
