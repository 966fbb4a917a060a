package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/faults"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// The third reproduction: one page of garbage in a running
// worker's view. Tenant reads answer 503 instead of crashing, /readyz
// says the view is corrupt with the file, the page and the rebuild
// command, the file's check ("substate verify --view-file") fails naming
// it, and ingest goes on (events wait on the stream). After a restart the
// file is moved aside and refilled: every event acknowledged with 202,
// before and after the damage, is in the view and verify finds it equal to
// the stream. What verify prints: TestVerifyCorruptView in cmd/substate.
func TestCorruptViewPage(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w.HTTP.URL(), "t", 2000)
	waitApplied(t, w, 2000)
	w.Stop(t)
	view := filepath.Join(dir, "view.db")
	page, err := faults.BoltBucketRoot(view, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	if err := state.CheckFile(view, 2*time.Second); err != nil {
		t.Fatalf("check of the intact file: %v", err)
	}

	w = workertest.Start(t, workertest.DataDir(dir))
	url := w.HTTP.URL()
	if err := faults.CorruptBoltPage(view, page); err != nil {
		t.Fatal(err)
	}
	if status, _ := workertest.Get(t, url+"/v1/tenants/t0001"); status != http.StatusServiceUnavailable {
		t.Fatalf("tenant read on a corrupt page: %d, want 503", status)
	}
	status, body := workertest.Get(t, url+"/readyz")
	for _, want := range []string{"is corrupt", view, fmt.Sprint(page), "substate rebuild --out " + view + " --force"} {
		if status != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			t.Fatalf("/readyz %d %s, want 503 saying %q", status, body, want)
		}
	}
	workertest.PostRows(t, url, "after", 100) // still 202: the events wait on the stream
	w.Stop(t)

	if err := state.CheckFile(view, 2*time.Second); err == nil || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), "substate rebuild") {
		t.Fatalf("check of the corrupt file: %v", err)
	}
	w = workertest.Start(t, workertest.DataDir(dir))
	waitApplied(t, w, 2100)
	for _, id := range []string{"t0001", "t1999", "after0099"} {
		if _, err := w.View.Tenant(context.Background(), id); err != nil {
			t.Fatalf("tenant %s after the restart: %v", id, err)
		}
	}
	if aside, _ := filepath.Glob(view + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("moved-aside files %v, want the corrupt one", aside)
	}
	verifyEqual(t, w)
	var ready map[string]string
	_, body = workertest.Get(t, w.HTTP.URL()+"/readyz")
	if err := json.Unmarshal([]byte(body), &ready); err != nil || ready["status"] != "ready" {
		t.Fatalf("/readyz after the rebuild: %s", body)
	}
}

// A corrupt page under a running worker that keeps receiving events: every
// batch fails to reach the view. /healthz used to stay 200 forever, so no
// liveness probe restarted the worker (only the restart mends the file),
// and "apply batch failed" was logged for every batch, dozens of times a
// second. Now /healthz answers 503 once the view has not been written for
// --view-failure-timeout, and the failure is logged once every ten seconds
// with how many batches failed meanwhile.
func TestCorruptViewFailsLiveness(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w.HTTP.URL(), "t", 2000)
	waitApplied(t, w, 2000)
	w.Stop(t)
	view := filepath.Join(dir, "view.db")
	page, err := faults.BoltBucketRoot(view, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	w = workertest.Start(t, workertest.DataDir(dir), func(f *worker.Flags) { f.ViewFailureTimeout = 2 * time.Second })
	url := w.HTTP.URL()
	if status, body := workertest.Get(t, url+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz before the damage: %d %s", status, body)
	}
	if err := faults.CorruptBoltPage(view, page); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		workertest.PostRows(t, url, fmt.Sprintf("after%d-", i), 100)
	}
	workertest.EventuallyWithin(t, time.Minute, func() string {
		status, body := workertest.Get(t, url+"/healthz")
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "the view has not been written for") {
			return fmt.Sprintf("/healthz %d %s, want 503 saying the view is not written", status, body)
		}
		return ""
	})
	// The failures go on; the log says so once every ten seconds.
	workertest.EventuallyWithin(t, time.Minute, func() string {
		if !regexp.MustCompile(`apply batch failed.* not_logged=[1-9]`).MatchString(w.Logs()) {
			return "no log line counts the failures it left out"
		}
		return ""
	})
	if n := strings.Count(w.Logs(), "apply batch failed"); n > 3 {
		t.Fatalf("%d lines of apply batch failed in the first ten seconds, want at most 3:\n%s", n, w.Logs())
	}
}
