package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/contracttest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestMain checks every response the tests fetch from a worker against
// contract/openapi.json.
func TestMain(m *testing.M) { contracttest.Main(m) }

// verify checks a running worker as "substate verify" does: it reads the
// view through the HTTP API, replays SUBSTATE_EVENTS up to the view's
// position into a fresh view and compares the two, then checks the same
// events against their raw evidence with the worker's tenant rules, and
// the raw evidence against the events (gaps).
func verify(tb testing.TB, w *workertest.Worker) replay.VerifyResult {
	tb.Helper()
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		tb.Fatal(err)
	}
	v := &replay.Verify{JS: w.Bus.JetStream, TenantRules: rules, TempDir: tb.TempDir(), Normalizer: bus.ConsumerNormalizer}
	res, err := v.Run(context.Background(), &httpapi.Client{URL: w.HTTP.URL()}, true)
	if err != nil {
		tb.Fatalf("verify: %v", err)
	}
	return res
}

// verifyEqual fails the test unless verify finds the live view equal to
// the replay and every event with its evidence: "substate verify" would
// exit 0.
func verifyEqual(tb testing.TB, w *workertest.Worker) replay.VerifyResult {
	tb.Helper()
	res := verify(tb, w)
	if res.Failed() {
		tb.Fatalf("verify: %d of %d tenants differ from the replay up to sequence %d (%+v); evidence %+v; gaps %+v", len(res.Diffs), res.Tenants, res.Seq, res.Diffs, res.Evidence, res.Gaps)
	}
	return res
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
