package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/faults"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// The second reproduction: the NATS store removed under a view
// that applied 2,000 events. Started with --on-stream-loss=refuse the
// worker refuses to open, saying what happened and the command to run
// ("substate run" exits non-zero with it); by default it moves the view
// aside, says so, and the 1,000 events posted next are in the view, which
// verify finds equal to the stream.
func TestStreamLossAfterStoreRemoved(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w.HTTP.URL(), "old", 2000)
	waitApplied(t, w, 2000)
	w.Stop(t)
	if err := os.RemoveAll(filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}

	refusing := worker.New(workertest.Flags(t, workertest.DataDir(dir), func(f *worker.Flags) { f.OnStreamLoss = "refuse" }))
	err := refusing.Open(context.Background())
	refusing.Close()
	want := []string{"was deleted and created again", "applied sequences up to 2000", "refusing to start", "substate rebuild --out " + filepath.Join(dir, "view.db") + " --force"}
	for _, s := range want {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("open with --on-stream-loss=refuse: %v, which lacks %q", err, s)
		}
	}

	w2 := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w2.HTTP.URL(), "new", 1000)
	waitApplied(t, w2, 1000)
	for _, id := range []string{"new0000", "new0999"} {
		if _, err := w2.View.Tenant(context.Background(), id); err != nil {
			t.Fatalf("tenant %s after the loss: %v", id, err)
		}
	}
	if _, err := w2.View.Tenant(context.Background(), "old0000"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Fatalf("tenant old0000, whose events are gone: %v, want not found", err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "view.db.stream-lost-*")); len(aside) != 1 {
		t.Fatalf("moved-aside view files %v, want one", aside)
	}
	verifyEqual(t, w2)
}

// SUBSTATE_EVENTS deleted under a running worker: it stops with an error
// saying so ("substate run" exits non-zero with it; its restart then maps
// SUBSTATE_RAW again into the new stream and rebuilds); it never idles on
// a consumer positioned past the new stream's end.
func TestStreamDeletedUnderRunningView(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir), func(f *worker.Flags) { f.StreamCheckEvery = 100 * time.Millisecond })
	workertest.PostRows(t, w.HTTP.URL(), "t", 100)
	waitApplied(t, w, 100)
	if err := w.Bus.JetStream.DeleteStream(context.Background(), substate.StreamEvents); err != nil {
		t.Fatalf("delete stream: %v", err)
	}
	if err := w.Wait(t); err == nil || !strings.HasPrefix(err.Error(), substate.StreamEvents+" was deleted under the running view") {
		t.Fatalf("the worker stopped with %v after the stream was deleted", err)
	}
	w2 := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w2.HTTP.URL(), "u", 100)
	waitApplied(t, w2, 200)
	for _, id := range []string{"t0000", "t0099", "u0099"} {
		if _, err := w2.View.Tenant(context.Background(), id); err != nil {
			t.Fatalf("tenant %s after the restart: %v", id, err)
		}
	}
	verifyEqual(t, w2)
}

// 4 KB of garbage in the middle of the events stream's block: the server
// cuts the block there at its next start, so the stream ends before the
// view's checkpoint. The worker says so, maps SUBSTATE_RAW again for what
// the stream lost (it once rebuilt from what was left: every tenant
// whose events were cut off was gone, and verify agreed), rebuilds the
// view, and what is posted next reaches the view.
func TestStreamBlockGarbage(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w.HTTP.URL(), "old", 2000)
	waitApplied(t, w, 2000)
	w.Stop(t)
	if _, _, err := faults.CorruptStreamBlock(filepath.Join(dir, "nats"), substate.StreamEvents, 0, 4096); err != nil {
		t.Fatal(err)
	}
	// A worker that refuses, on a copy: the server reports the cut once,
	// at the start that finds it.
	refuseDir := copyDataDir(t, dir)
	refusing := worker.New(workertest.Flags(t, workertest.DataDir(refuseDir), func(f *worker.Flags) { f.OnStreamLoss = "refuse" }))
	err := refusing.Open(context.Background())
	refusing.Close()
	for _, s := range []string{"ends at sequence", "SUBSTATE_RAW may still hold the lost events' evidence: map it again with: substate renormalize --since ", "start with --on-stream-loss=rebuild"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("open with --on-stream-loss=refuse: %v, which lacks %q", err, s)
		}
	}
	w2 := workertest.Start(t, workertest.DataDir(dir))
	if aside, _ := filepath.Glob(filepath.Join(dir, "view.db.stream-lost-*")); len(aside) != 1 {
		t.Fatalf("moved-aside view files %v, want one: the stream ends before the checkpoint", aside)
	}
	if got := testutil.ToFloat64(w2.Metrics.StreamLosses); got != 1 {
		t.Fatalf("substate_stream_losses_total %v, want 1", got)
	}
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		for i := range 2000 {
			if _, err := w2.View.Tenant(context.Background(), fmt.Sprintf("old%04d", i)); err != nil {
				return fmt.Sprintf("tenant old%04d after the restart: %v", i, err)
			}
		}
		return ""
	})
	workertest.PostRows(t, w2.HTTP.URL(), "new", 1000)
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		if _, err := w2.View.Tenant(context.Background(), "new0999"); err != nil {
			return "new0999: " + err.Error()
		}
		return ""
	})
	workertest.WaitSettled(t, w2.Bus.ClientURL(), bustest.Seed(t, w2.Bus, bus.Worker))
	verifyEqual(t, w2)
}

// copyDataDir copies a stopped worker's data directory, its NATS
// credentials readable by the owner only, as the worker requires.
func copyDataDir(tb testing.TB, dir string) string {
	tb.Helper()
	out := tb.TempDir()
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		tb.Fatal(err)
	}
	seeds, _ := filepath.Glob(filepath.Join(worker.NATSCredentialsDir(out), "*.nk"))
	for _, f := range seeds {
		if err := os.Chmod(f, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}
