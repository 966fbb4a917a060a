package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/substatehq/substate/testkit/faults"
)

// The third reproduction: one page of garbage in a running
// worker's view. Tenant reads answer 503 instead of crashing, /readyz
// says the view is corrupt with the file, the page and the rebuild
// command, verify fails naming it, and ingest goes on (events wait on the
// stream). After a restart the file is moved aside and refilled: every
// event acknowledged with 202, before and after the damage, is in the view
// and verify finds it equal to the stream.
func TestCorruptViewPage(t *testing.T) {
	dir := t.TempDir()
	w := startWorker(t, dir)
	postRows(t, w.HTTP.URL(), "t", 2000)
	waitApplied(t, w.Worker, 2000)
	w.stop(t)
	view := filepath.Join(dir, "view.db")
	page, err := faults.BoltBucketRoot(view, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "verify", "--view-file", view)
	if code != 0 || !strings.Contains(out, "consistent") {
		t.Fatalf("verify --view-file on an intact file: exit %d %s", code, out)
	}

	w = startWorker(t, dir)
	url := w.HTTP.URL()
	if err := faults.CorruptBoltPage(view, page); err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, url+"/v1/tenants/t0001"); status != http.StatusServiceUnavailable {
		t.Fatalf("tenant read on a corrupt page: %d, want 503", status)
	}
	status, body := get(t, url+"/readyz")
	for _, want := range []string{"is corrupt", view, fmt.Sprint(page), "substate rebuild --out " + view + " --force"} {
		if status != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			t.Fatalf("/readyz %d %s, want 503 saying %q", status, body, want)
		}
	}
	code, _, errOut := runCLI(t, "verify", "--server", url)
	if code == 0 || !strings.Contains(errOut, "is corrupt") {
		t.Fatalf("verify of a corrupt view: exit %d %s", code, errOut)
	}
	postRows(t, url, "after", 100) // still 202: the events wait on the stream
	w.stop(t)

	code, _, errOut = runCLI(t, "verify", "--view-file", view)
	if code == 0 || !strings.Contains(errOut, "is corrupt") || !strings.Contains(errOut, "substate rebuild") {
		t.Fatalf("verify --view-file on the corrupt file: exit %d %s", code, errOut)
	}
	w = startWorker(t, dir)
	waitApplied(t, w.Worker, 2100)
	for _, id := range []string{"t0001", "t1999", "after0099"} {
		if _, err := w.View.Tenant(context.Background(), id); err != nil {
			t.Fatalf("tenant %s after the restart: %v", id, err)
		}
	}
	if aside, _ := filepath.Glob(view + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("moved-aside files %v, want the corrupt one", aside)
	}
	verifyEqual(t, w.Worker)
	var ready map[string]string
	_, body = get(t, w.HTTP.URL()+"/readyz")
	if err := json.Unmarshal([]byte(body), &ready); err != nil || ready["status"] != "ready" {
		t.Fatalf("/readyz after the rebuild: %s", body)
	}
}
