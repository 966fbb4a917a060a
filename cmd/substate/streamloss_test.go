package main

import (
	"context"
	"encoding/json"
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
	"github.com/substatehq/substate/worker"
)

// postRows posts n Restate rows, tenants prefix0000…, in requests of 100
// rows each ({"rows":[…]}), and fails unless each is answered 202.
func postRows(tb testing.TB, url, prefix string, n int) {
	tb.Helper()
	for start := 0; start < n; start += 100 {
		var rows []map[string]any
		for i := start; i < min(start+100, n); i++ {
			tenant := fmt.Sprintf("%s%04d", prefix, i)
			rows = append(rows, map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": "running",
				"created_at": "2026-11-01T10:00:00Z", "modified_at": "2026-11-01T10:00:01Z"})
		}
		body, _ := json.Marshal(map[string]any{"rows": rows})
		if err := deliverRow(url, fmt.Sprintf("%s-%d", prefix, start), body); err != nil {
			tb.Fatalf("post rows %s%d: %v", prefix, start, err)
		}
	}
}

// waitApplied waits until the view's checkpoint reaches seq.
func waitApplied(tb testing.TB, w *worker.Worker, seq uint64) {
	tb.Helper()
	eventuallyWithin(tb, 30*time.Second, func() string {
		if cp, _ := w.View.Checkpoint(context.Background()); cp < seq {
			return fmt.Sprintf("view checkpoint %d, want %d", cp, seq)
		}
		return ""
	})
}

// verifyEqual runs substate verify against a running worker.
func verifyEqual(tb testing.TB, w *worker.Worker) {
	tb.Helper()
	code, out, errOut := runCLI(tb, "verify", "--server", w.HTTP.URL(), "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(tb, w.Bus, bus.Worker))
	if code != 0 || !strings.Contains(out, "the live view equals the replay") {
		tb.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

// The second reproduction: the NATS store removed under a view
// that applied 2,000 events. Started with --on-stream-loss=refuse the
// worker exits non-zero saying what happened and the command to run; by
// default it moves the view aside, says so, and the 1,000 events posted
// next are in the view, which verify finds equal to the stream.
func TestStreamLossAfterStoreRemoved(t *testing.T) {
	dir := t.TempDir()
	w := startWorker(t, dir)
	postRows(t, w.HTTP.URL(), "old", 2000)
	waitApplied(t, w.Worker, 2000)
	w.stop(t)
	if err := os.RemoveAll(filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}

	code, _, errOut := runCLI(t, "run", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--on-stream-loss", "refuse", "--log-level", "warn")
	want := []string{"was deleted and created again", "applied sequences up to 2000", "refusing to start", "substate rebuild --out " + filepath.Join(dir, "view.db") + " --force"}
	for _, s := range want {
		if code == 0 || !strings.Contains(errOut, s) {
			t.Fatalf("run --on-stream-loss=refuse: exit %d, output lacks %q:\n%s", code, s, errOut)
		}
	}

	w2 := startWorker(t, dir).Worker
	postRows(t, w2.HTTP.URL(), "new", 1000)
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

// SUBSTATE_EVENTS deleted under a running worker: it exits non-zero
// saying so (its restart then rebuilds); it never idles on a consumer
// positioned past the new stream's end.
func TestStreamDeletedUnderRunningView(t *testing.T) {
	dir := t.TempDir()
	w, done, out := startWorkerMain(t, dir, "--stream-check-every", "100ms")
	postRows(t, w.HTTP.URL(), "t", 100)
	waitApplied(t, w, 100)
	if err := w.Bus.JetStream.DeleteStream(context.Background(), substate.StreamEvents); err != nil {
		t.Fatalf("delete stream: %v; output:\n%s", err, out)
	}
	if code := waitExit(t, done, out); code == 0 || !strings.Contains(out.String(), "substate: "+substate.StreamEvents+" was deleted under the running view") {
		t.Fatalf("exit %d after the stream was deleted; output:\n%s", code, out)
	}
	w2 := startWorker(t, dir)
	postRows(t, w2.HTTP.URL(), "u", 100)
	waitApplied(t, w2.Worker, 100)
	if _, err := w2.View.Tenant(context.Background(), "u0099"); err != nil {
		t.Fatalf("tenant u0099 after the restart: %v", err)
	}
	verifyEqual(t, w2.Worker)
}

// 4 KB of garbage in the middle of the events stream's block: the server
// cuts the block there at its next start, so the stream ends before the
// view's checkpoint. The worker says so, rebuilds the view from what is
// left, and what is posted next reaches the view.
func TestStreamBlockGarbage(t *testing.T) {
	dir := t.TempDir()
	w := startWorker(t, dir)
	postRows(t, w.HTTP.URL(), "old", 2000)
	waitApplied(t, w.Worker, 2000)
	w.stop(t)
	if _, _, err := faults.CorruptStreamBlock(filepath.Join(dir, "nats"), substate.StreamEvents, 0, 4096); err != nil {
		t.Fatal(err)
	}
	w2 := startWorker(t, dir)
	if aside, _ := filepath.Glob(filepath.Join(dir, "view.db.stream-lost-*")); len(aside) != 1 {
		t.Fatalf("moved-aside view files %v, want one: the stream ends before the checkpoint", aside)
	}
	if got := testutil.ToFloat64(w2.Metrics.StreamLosses); got != 1 {
		t.Fatalf("substate_stream_losses_total %v, want 1", got)
	}
	postRows(t, w2.HTTP.URL(), "new", 1000)
	eventuallyWithin(t, 30*time.Second, func() string {
		if _, err := w2.View.Tenant(context.Background(), "new0999"); err != nil {
			return "new0999: " + err.Error()
		}
		return ""
	})
	waitSettled(t, w2.Bus.ClientURL(), bustest.Seed(t, w2.Bus, bus.Worker))
	verifyEqual(t, w2.Worker)
}
