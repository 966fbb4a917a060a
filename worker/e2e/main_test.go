package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/contracttest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestMain checks every response the tests fetch from a worker against
// contract/openapi.json.
func TestMain(m *testing.M) { contracttest.Main(m) }

// verification is what "substate verify" finds on a running worker.
type verification struct {
	tenants  int                 // in the live view
	diffs    []replay.TenantDiff // tenants whose live view differs from the replay
	evidence replay.CheckResult  // the events up to the live view's position against SUBSTATE_RAW
}

// verify checks a running worker as "substate verify" does: it reads the
// view through the HTTP API between two equal readings of its position,
// replays SUBSTATE_EVENTS up to that position into a fresh view and
// compares the two, then checks the same events against their raw
// evidence with the worker's tenant rules.
func verify(tb testing.TB, w *workertest.Worker) verification {
	tb.Helper()
	ctx := context.Background()
	client := &httpapi.Client{URL: w.HTTP.URL()}
	var live []substate.TenantView
	var seq uint64
	workertest.Eventually(tb, func() string {
		from, err := client.Checkpoint(ctx)
		if err != nil {
			return "checkpoint: " + err.Error()
		}
		if live, err = client.AllTenants(ctx, substate.TenantFilter{Limit: 1000}); err != nil {
			return "tenants: " + err.Error()
		}
		to, err := client.Checkpoint(ctx)
		if err != nil || to.Applied != from.Applied {
			return "the view moved while it was read"
		}
		seq = to.Applied
		return ""
	})
	v := verification{tenants: len(live)}
	if seq == 0 {
		return v
	}
	db, _, err := worker.RebuildView(ctx, w.Bus.JetStream, filepath.Join(tb.TempDir(), "view.db"), replay.Range{ToSeq: seq}, 512, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	replayed, err := worker.AllViews(ctx, db)
	if err != nil {
		tb.Fatal(err)
	}
	v.diffs = replay.Compare(live, replayed)
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		tb.Fatal(err)
	}
	ch := &replay.Checker{Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, MappingVersion: mapping.Version}
	if v.evidence, err = ch.Run(ctx, replay.Range{ToSeq: seq}); err != nil {
		tb.Fatal(err)
	}
	return v
}

// verifyEqual fails the test unless verify finds the live view equal to
// the replay and every event with its evidence: "substate verify" would
// exit 0.
func verifyEqual(tb testing.TB, w *workertest.Worker) verification {
	tb.Helper()
	v := verify(tb, w)
	if len(v.diffs) > 0 || v.evidence.Failed() {
		tb.Fatalf("verify: %d of %d tenants differ from the replay (%+v); evidence %v %+v", len(v.diffs), v.tenants, v.diffs, v.evidence.Counts, v.evidence.Findings)
	}
	return v
}

// waitApplied waits until the view's checkpoint reaches seq.
func waitApplied(tb testing.TB, w *workertest.Worker, seq uint64) {
	tb.Helper()
	workertest.EventuallyWithin(tb, 30*time.Second, func() string {
		if cp, _ := w.View.Checkpoint(context.Background()); cp < seq {
			return fmt.Sprintf("view checkpoint %d, want %d", cp, seq)
		}
		return ""
	})
}
