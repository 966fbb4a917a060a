package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/faults"
	"github.com/substatehq/substate/testkit/workertest"
)

// What "substate verify" says of a corrupt view (the third
// reproduction: one page of garbage in a running worker's view): with
// --view-file it checks a stopped worker's file, consistent before the
// damage, corrupt after it, naming the rebuild command; with --server it
// fails on the running worker's /readyz, which says the view is corrupt.
// What the worker does with the page: TestCorruptViewPage in worker/e2e.
func TestVerifyCorruptView(t *testing.T) {
	dir := t.TempDir()
	p := startWorkerProcess(t, dir)
	workertest.PostRows(t, p.httpURL, "t", 2000)
	waitCheckpoint(t, p, 2000)
	p.terminate(t)
	view := filepath.Join(dir, "view.db")
	page, err := faults.BoltBucketRoot(view, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "verify", "--view-file", view)
	if code != 0 || !strings.Contains(out, "consistent") {
		t.Fatalf("verify --view-file on an intact file: exit %d %s", code, out)
	}

	p = startWorkerProcess(t, dir)
	if err := faults.CorruptBoltPage(view, page); err != nil {
		t.Fatal(err)
	}
	// A read meets the page: the view is corrupt from then on.
	if status, _ := workertest.Get(t, p.httpURL+"/v1/tenants/t0001"); status != http.StatusServiceUnavailable {
		t.Fatalf("tenant read on a corrupt page: %d, want 503", status)
	}
	code, _, errOut := runCLI(t, "verify", "--server", p.httpURL)
	if code == 0 || !strings.Contains(errOut, "is corrupt") {
		t.Fatalf("verify of a corrupt view: exit %d %s", code, errOut)
	}
	p.terminate(t)

	code, _, errOut = runCLI(t, "verify", "--view-file", view)
	if code == 0 || !strings.Contains(errOut, "is corrupt") || !strings.Contains(errOut, "substate rebuild") {
		t.Fatalf("verify --view-file on the corrupt file: exit %d %s", code, errOut)
	}
}

// waitCheckpoint waits until the worker's view has committed sequence seq.
func waitCheckpoint(tb testing.TB, p *process, seq uint64) {
	tb.Helper()
	workertest.EventuallyWithin(tb, 30*time.Second, func() string {
		var pos httpapi.ViewPosition
		if code := workertest.GetJSON(tb, p.httpURL+"/v1/view/checkpoint", &pos); code != http.StatusOK || pos.Checkpoint < seq {
			return fmt.Sprintf("view checkpoint %d, want %d (HTTP %d)", pos.Checkpoint, seq, code)
		}
		return ""
	})
}
