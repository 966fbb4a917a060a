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

	wantRefused(t, dir, "was deleted and created again", "applied sequences up to 2000", "refusing to start", "substate rebuild --out "+filepath.Join(dir, "view.db")+" --force")

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
	wantRefused(t, refuseDir, "ends at sequence", "SUBSTATE_RAW may still hold the lost events' evidence: map it again with: substate renormalize --since ", "start with --on-stream-loss=rebuild")
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

// The NATS store replaced by an older copy that nonetheless ends at or
// past the view's checkpoint, so that counting sequences finds nothing
// wrong: the view applied 3 events ("late") the copy never held, yet the
// restart once said nothing, the view kept those tenants (verify: Only
// live) and a view positioned past the copy's end skipped what the copy
// stored there next. Two ways a copy gets there:
//
//   - StateAhead: the stream state files are later than the copy's
//     messages, as a server running on a store renamed away leaves them in
//     the copy put in its place (it writes them by path, its messages into
//     the files it holds open): the stream ends at the checkpoint with the
//     late events missing;
//   - TookWrites: the copy took writes before this view's worker started
//     on it (here a replica's, --instance, ingesting 5 tenants): the
//     stream holds other events at the view's sequences.
//
// The worker finds the event at its checkpoint gone or another one,
// refuses with --on-stream-loss=refuse naming the commands, and by default
// maps SUBSTATE_RAW again and rebuilds: the view holds what the stream
// holds (the late tenants' evidence went with the newer store), what the
// replica ingested included, and what is posted next.
func TestStreamLossAfterStoreReplacedByCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		// change gets the data directory with the older copy of the store
		// in place, and the directory of the newer store.
		change func(t *testing.T, dir, newer string)
		tenant string // a tenant the stream holds that the view never applied
	}{
		{"StateAhead", func(t *testing.T, dir, newer string) {
			copyStateFiles(t, newer, filepath.Join(dir, "nats"))
		}, ""},
		{"TookWrites", func(t *testing.T, dir, _ string) {
			r := workertest.Start(t, workertest.DataDir(dir), func(f *worker.Flags) { f.Instance = "replica" })
			workertest.PostRows(t, r.HTTP.URL(), "other", 5)
			waitApplied(t, r, 205)
			r.Stop(t)
		}, "other0004"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "nats")
			w := workertest.Start(t, workertest.DataDir(dir))
			workertest.PostRows(t, w.HTTP.URL(), "old", 200)
			waitApplied(t, w, 200)
			w.Stop(t)
			if err := copyDir(store, store+".older"); err != nil {
				t.Fatal(err)
			}
			w = workertest.Start(t, workertest.DataDir(dir))
			workertest.PostRows(t, w.HTTP.URL(), "late", 3)
			waitApplied(t, w, 203)
			w.Stop(t)
			if err := os.Rename(store, store+".newer"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(store+".older", store); err != nil {
				t.Fatal(err)
			}
			tc.change(t, dir, store+".newer")

			refuseDir := copyDataDir(t, dir)
			wantRefused(t, refuseDir, "the view applied at sequence 203", "refusing to start", "substate renormalize", "substate rebuild --out "+filepath.Join(refuseDir, "view.db")+" --force")

			w2 := workertest.Start(t, workertest.DataDir(dir))
			if aside, _ := filepath.Glob(filepath.Join(dir, "view.db.stream-lost-*")); len(aside) != 1 {
				t.Fatalf("moved-aside view files %v, want one: the stream does not hold the view's events", aside)
			}
			if got := testutil.ToFloat64(w2.Metrics.StreamLosses); got != 1 {
				t.Fatalf("substate_stream_losses_total %v, want 1", got)
			}
			workertest.PostRows(t, w2.HTTP.URL(), "new", 10)
			workertest.EventuallyWithin(t, 30*time.Second, func() string {
				for _, id := range []string{"old0000", "old0199", "new0009", tc.tenant} {
					if _, err := w2.View.Tenant(context.Background(), id); id != "" && err != nil {
						return fmt.Sprintf("tenant %s after the restart: %v", id, err)
					}
				}
				return ""
			})
			if _, err := w2.View.Tenant(context.Background(), "late0000"); substate.ErrorCode(err) != substate.ENOTFOUND {
				t.Fatalf("tenant late0000, whose events and evidence the copy never held: %v, want not found", err)
			}
			workertest.WaitSettled(t, w2.Bus.ClientURL(), bustest.Seed(t, w2.Bus, bus.Worker))
			verifyEqual(t, w2)
		})
	}
}

// copyStateFiles copies the streams' and consumers' state files (index.db,
// o.dat) of the store from into the store to, leaving its messages.
func copyStateFiles(tb testing.TB, from, to string) {
	tb.Helper()
	var n int
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (d.Name() != "index.db" && d.Name() != "o.dat") {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil || n == 0 {
		tb.Fatalf("copy the state files: %d copied, %v", n, err)
	}
}

// wantRefused opens a worker on dir with --on-stream-loss=refuse and fails
// the test unless it refuses to start with an error that says each of
// want.
func wantRefused(t *testing.T, dir string, want ...string) {
	t.Helper()
	refusing := worker.New(workertest.Flags(t, workertest.DataDir(dir), func(f *worker.Flags) { f.OnStreamLoss = "refuse" }))
	err := refusing.Open(context.Background())
	refusing.Close()
	for _, s := range want {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("open with --on-stream-loss=refuse: %v, which lacks %q", err, s)
		}
	}
}
