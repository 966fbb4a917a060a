package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/faults"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// The fourth reproduction: the worker's disk fills, then space is
// freed. While it is full ingest answers 503 with Retry-After and /readyz
// says why; once freed both recover without a restart, and every event
// acknowledged with 202, before and after, is in the view, which verify
// finds equal to the stream. Needs a tmpfs (root on Linux, as in CI).
func TestDiskFullThenFreed(t *testing.T) {
	dir := faults.Tmpfs(t, 48<<20)
	w := workertest.Start(t, workertest.DataDir(dir), func(f *worker.Flags) { f.AckWait = 2 * time.Second })
	url := w.HTTP.URL()
	workertest.PostRows(t, url, "before", 500)
	waitApplied(t, w, 500)
	filler, err := faults.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	var status int
	var retryAfter string
	for i := 0; ; i++ { // a publish that finds the disk full is not acknowledged
		status, retryAfter = postStatus(t, url, fmt.Sprintf("full%04d", i))
		if status != http.StatusAccepted {
			break
		}
		acked++
		if acked > 10000 {
			t.Fatal("the disk never filled")
		}
	}
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("ingest on a full disk: %d Retry-After %q, want 503 with Retry-After", status, retryAfter)
	}
	workertest.EventuallyWithin(t, 20*time.Second, func() string {
		if s, body := workertest.Get(t, url+"/readyz"); s != http.StatusServiceUnavailable || !strings.Contains(body, "nats store cannot take writes") {
			return fmt.Sprintf("/readyz on a full disk: %d %s", s, body)
		}
		return ""
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		if s, body := workertest.Get(t, url+"/readyz"); s != http.StatusOK {
			return fmt.Sprintf("/readyz after freeing the disk: %d %s", s, body)
		}
		return ""
	})
	workertest.PostRows(t, url, "after", 500)
	workertest.EventuallyWithin(t, 120*time.Second, func() string {
		for _, id := range []string{"before0499", "after0499"} {
			if _, err := w.View.Tenant(t.Context(), id); err != nil {
				return id + ": " + err.Error()
			}
		}
		for i := range acked {
			if _, err := w.View.Tenant(t.Context(), fmt.Sprintf("full%04d", i)); err != nil {
				return fmt.Sprintf("full%04d, acknowledged while the disk filled: %v", i, err)
			}
		}
		return ""
	})
	verifyEqual(t, w)
	t.Logf("%d events acknowledged while the disk filled", acked)
}

// postStatus posts one Restate row for tenant and returns the status and
// the Retry-After header.
func postStatus(tb testing.TB, url, tenant string) (int, string) {
	tb.Helper()
	body := fmt.Sprintf(`{"id":"inv_%s","target_service_key":%q,"status":"running","created_at":"2026-11-01T10:00:00Z","modified_at":"2026-11-01T10:00:01Z"}`, tenant, tenant)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/ingest/restate", strings.NewReader(body))
	req.Header.Set("webhook-id", tenant)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}
