package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/workertest"
)

// workerStory runs a worker and normalizes the story of a few tenants
// through it, then waits until its view reflects every event.
func workerStory(tb testing.TB) *workertest.Worker {
	tb.Helper()
	w := workertest.Start(tb)
	for i := range 3 {
		workertest.PublishStory(tb, w.Bus, fmt.Sprintf("tenant-%d", i), workertest.Story[:3+2*i])
	}
	workertest.Eventually(tb, func() string {
		_, last, _, err := (&replay.Reader{JS: w.Bus.JetStream}).Bounds(context.Background(), substate.StreamEvents)
		if err != nil {
			return err.Error()
		}
		if got := w.View.Applied(); got != last || last == 0 {
			return fmt.Sprintf("view applied %d of %d", got, last)
		}
		return ""
	})
	return w
}

// A view written directly, as a bug or a hand edit would, differs from
// the replay of the stream in the tenant and the fields written, and in
// nothing else. How "substate verify" says so: TestVerifyTamperedView in
// cmd/substate.
func TestVerifyTamperedView(t *testing.T) {
	w := workerStory(t)
	// An event no stream holds, at a sequence the projector has not
	// reached.
	d := substate.EventData{TenantID: "tenant-1", Provider: substate.ProviderEngine, ExecutionID: "run-1",
		SubState: substate.StateError, ErrorMessage: "edited by hand", Revision: 99, RetryCount: 7, RetryCountKnown: true,
		OccurredAt: workertest.T0, ExecutionStartedAt: workertest.T0}
	d.Normalize()
	if _, err := w.View.Apply(context.Background(), []substate.Sequenced{{Seq: w.View.Applied() + 1000, Event: d}}); err != nil {
		t.Fatal(err)
	}
	v := verify(t, w)
	if v.Tenants != 3 || len(v.Diffs) != 1 || v.Diffs[0].TenantID != "tenant-1" || v.Diffs[0].Only != "" {
		t.Fatalf("%d tenants, diffs %+v; want tenant-1 of 3 to differ", v.Tenants, v.Diffs)
	}
	for _, want := range []replay.FieldDiff{
		{Field: "workflowRetryCount", Live: "7", Replay: "1"},
		{Field: "workflowErrorMessage", Live: "edited by hand", Replay: ""},
	} {
		if !slices.Contains(v.Diffs[0].Fields, want) {
			t.Errorf("tenant-1's fields %+v lack %+v", v.Diffs[0].Fields, want)
		}
	}
}
