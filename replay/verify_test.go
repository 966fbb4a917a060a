package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
)

// liveClient is a replay.LiveClient of function fields.
type liveClient struct {
	ready   func() error
	applied func() uint64
	tenants func() []substate.TenantView
}

func (c liveClient) Ready(context.Context) error { return c.ready() }

func (c liveClient) Applied(context.Context) (uint64, error) { return c.applied(), nil }

func (c liveClient) AllTenants(context.Context, substate.TenantFilter) ([]substate.TenantView, error) {
	return c.tenants(), nil
}

// viewClient reads a view directly, as a worker's read API would serve it.
func viewClient(tb testing.TB, db *state.DB) liveClient {
	return liveClient{
		ready:   func() error { return nil },
		applied: db.Applied,
		tenants: func() []substate.TenantView { return allTenants(tb, db) },
	}
}

// engineEvent is one canonical event of tenant's run-1 at revision rev.
func engineEvent(tenant string, rev substate.Revision, s substate.SubState) substate.EventData {
	d := substate.EventData{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "run-1", Workflow: "provision",
		SubState: s, Revision: rev, OccurredAt: t0.Add(time.Duration(rev) * time.Minute), ExecutionStartedAt: t0}
	d.Normalize()
	return d
}

func TestVerify(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	live := openView(t, "live.db")
	runProjector(t, b, live)
	for _, tenant := range []string{"a", "b", "c"} {
		publish(t, b, engineEvent(tenant, 1, substate.StateRunning), engineEvent(tenant, 2, substate.StateError))
	}
	waitApplied(t, live, lastSeq(t, b))
	v := &replay.Verify{JS: b.JetStream, TempDir: t.TempDir()}

	t.Run("Equal", func(t *testing.T) {
		res, err := v.Run(context.Background(), viewClient(t, live), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Seq != lastSeq(t, b) || res.Tenants != 3 || res.Replay.Events != 6 || res.Evidence != nil {
			t.Fatalf("result %+v, want equal, 3 tenants, 6 events, no evidence check", res)
		}
	})
	t.Run("Differ", func(t *testing.T) {
		tampered := allTenants(t, live)
		tampered[1].WorkflowRetryCount = 7
		c := viewClient(t, live)
		c.tenants = func() []substate.TenantView { return tampered }
		res, err := v.Run(context.Background(), c, false)
		if err != nil {
			t.Fatal(err)
		}
		want := replay.FieldDiff{Field: "workflowRetryCount", Live: "7", Replay: "0"}
		if !res.Failed() || len(res.Diffs) != 1 || res.Diffs[0].TenantID != "b" || len(res.Diffs[0].Fields) != 1 || res.Diffs[0].Fields[0] != want {
			t.Fatalf("diffs %+v, want tenant b's retry count", res.Diffs)
		}
	})
	t.Run("EvidenceMissing", func(t *testing.T) {
		// The events were published straight on SUBSTATE_EVENTS: no raw
		// message stands behind them.
		res, err := v.Run(context.Background(), viewClient(t, live), true)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Failed() || len(res.Diffs) != 0 || res.Evidence == nil || res.Evidence.Counts[replay.CheckMissing] != 6 {
			t.Fatalf("result %+v, evidence %+v, want the 6 events missing their evidence", res, res.Evidence)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		c := liveClient{ready: func() error { return nil }, applied: func() uint64 { return 0 }, tenants: func() []substate.TenantView { return nil }}
		res, err := v.Run(context.Background(), c, true)
		if err != nil || res.Failed() || res.Seq != 0 || res.Replay.Events != 0 || res.Evidence != nil {
			t.Fatalf("result %+v, %v: want an empty view equal, nothing replayed or checked", res, err)
		}
	})
}

// TestVerifyLeavesOutTenantsThatMoved checks the window a busy worker
// leaves between two readings of its position: the tenants of the events
// applied in it are not compared.
func TestVerifyLeavesOutTenantsThatMoved(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publish(t, b, engineEvent("quiet", 1, substate.StateRunning), engineEvent("quiet", 2, substate.StateError))
	publish(t, b, engineEvent("busy", 1, substate.StateRunning))
	// The live view as read: both tenants differ from the replay, and
	// sequence 3 (busy's) was applied while it was read.
	live := replay.Live{From: 2, To: 3, Tenants: []substate.TenantView{
		{TenantID: "busy", WorkflowSubState: substate.StateError},
		{TenantID: "quiet", WorkflowSubState: substate.StateRunning},
	}}
	c, err := (&replay.Verify{JS: b.JetStream, TempDir: t.TempDir()}).Compare(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	if c.Moved != 1 {
		t.Fatalf("moved %d, want busy only", c.Moved)
	}
	if len(c.Diffs) != 1 || c.Diffs[0].TenantID != "quiet" {
		t.Fatalf("diffs %+v", c.Diffs)
	}
}

func TestReadLive(t *testing.T) {
	tenants := func() []substate.TenantView { return []substate.TenantView{{TenantID: "a"}} }
	ok := func() error { return nil }
	t.Run("Steady", func(t *testing.T) {
		lv, err := replay.ReadLive(context.Background(), liveClient{ready: ok, applied: func() uint64 { return 9 }, tenants: tenants})
		if err != nil || lv.From != 9 || lv.To != 9 || len(lv.Tenants) != 1 {
			t.Fatalf("live %+v, %v", lv, err)
		}
	})
	t.Run("Moving", func(t *testing.T) {
		var n uint64
		c := liveClient{ready: ok, applied: func() uint64 { n++; return n }, tenants: tenants}
		lv, err := replay.ReadLive(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := n, uint64(10); got != want { // five attempts, two readings each
			t.Errorf("positions read %d times, want %d", got, want)
		}
		if lv.From != 9 || lv.To != 10 {
			t.Errorf("window %d to %d, want the last attempt's 9 to 10", lv.From, lv.To)
		}
	})
	t.Run("SettlesOnSecondAttempt", func(t *testing.T) {
		positions := []uint64{1, 2, 2, 2}
		c := liveClient{ready: ok, applied: func() uint64 { p := positions[0]; positions = positions[1:]; return p }, tenants: tenants}
		lv, err := replay.ReadLive(context.Background(), c)
		if err != nil || lv.From != 2 || lv.To != 2 || len(positions) != 0 {
			t.Fatalf("live %+v, %v, %d positions unread", lv, err, len(positions))
		}
	})
	t.Run("Corrupt", func(t *testing.T) {
		corrupt := func() error {
			return substate.Errorf(substate.EUNAVAILABLE, "view /data/view.db is corrupt at page 7: run substate rebuild")
		}
		_, err := replay.ReadLive(context.Background(), liveClient{ready: corrupt, applied: func() uint64 { return 1 }, tenants: tenants})
		if err == nil || !strings.Contains(err.Error(), "not usable") || !strings.Contains(err.Error(), "page 7") {
			t.Fatalf("err %v, want the worker's own words", err)
		}
	})
	t.Run("NotReady", func(t *testing.T) {
		catchingUp := func() error { return errors.New("catching up") }
		lv, err := replay.ReadLive(context.Background(), liveClient{ready: catchingUp, applied: func() uint64 { return 1 }, tenants: tenants})
		if err != nil || lv.To != 1 {
			t.Fatalf("live %+v, %v: a view catching up is read all the same", lv, err)
		}
	})
}
