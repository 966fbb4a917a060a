package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestRequeueStaysInsideTheKeysTenants is broken object-level
// authorization tried on the requeue of dead letters: an admin key limited
// to the tenants acme-… requeues dead letters that become another
// tenant's events. Three executions are dead-lettered because the worker's
// first tenant rule finds no tenant; the operator then adds a rule on the
// execution name and restarts. The acme key may requeue only a dead letter
// it lists (its payload names an acme tenant), and only when every event
// it maps to is an acme tenant, which is checked before anything is
// published: a dead letter it does not list, and one whose payload says
// acme-1 but whose execution name maps it to beta-9, are refused with 403
// and publish nothing. The acme one is requeued; an unrestricted admin
// key requeues beta-9.
func TestRequeueStaysInsideTheKeysTenants(t *testing.T) {
	w, all := deadLetteredThenFixed(t)
	seqOf := map[string]uint64{}
	for _, d := range all.DeadLetters {
		seqOf[d.TenantID] = d.Seq
	}
	url := w.HTTP.URL()
	if acme := deadLetters(t, url, acmeKey); len(acme.DeadLetters) != 2 {
		t.Fatalf("the acme key lists %+v, want the two whose payload names an acme tenant", acme.DeadLetters)
	}
	before := streamCounts(t, w)
	for _, tc := range []struct{ name, listedAs, key string }{
		{"Disguised", "acme-1", acmeKey},
		{"Unlisted", "", acmeKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := requeue(t, url, seqOf[tc.listedAs], tc.key)
			if code != http.StatusForbidden || !strings.Contains(body, "forbidden") {
				t.Fatalf("requeue with the acme key: %d %s, want 403", code, body)
			}
			if now := streamCounts(t, w); now != before {
				t.Fatalf("streams %v after a refused requeue, want %v", now, before)
			}
		})
	}
	for _, id := range []string{"beta-9", "beta-7"} {
		if _, err := w.View.Tenant(context.Background(), id); substate.ErrorCode(err) != substate.ENOTFOUND {
			t.Errorf("tenant %s after the refused requeues: %v, want not found", id, err)
		}
	}

	for _, tc := range []struct{ listedAs, key, tenant string }{
		{"acme-4", acmeKey, "acme-4"},
		{"acme-1", rootKey, "beta-9"},
	} {
		if code, body := requeue(t, url, seqOf[tc.listedAs], tc.key); code != http.StatusOK {
			t.Fatalf("requeue of %s's dead letter: %d %s", tc.tenant, code, body)
		}
		workertest.Eventually(t, func() string {
			if v, err := w.View.Tenant(context.Background(), tc.tenant); err != nil || v.WorkflowSubState != substate.StateFailed {
				return fmt.Sprintf("tenant %s: %+v %v", tc.tenant, v, err)
			}
			return ""
		})
	}
}

// Keys of the requeue tests: an admin key limited to the tenants acme-…,
// and an unrestricted one.
const acmeKey, rootKey = "acme-admin-0123456789abcdef0123456789", "root-admin-0123456789abcdef0123456789"

// deadLetteredThenFixed is the requeue tests' incident: three executions
// are dead-lettered because the worker's first tenant rule finds no
// tenant; the operator then adds a rule on the execution name and
// restarts. It returns the restarted worker, with acmeKey and rootKey, and
// the three dead letters as rootKey lists them.
func deadLetteredThenFixed(t *testing.T) (*workertest.Worker, console.DeadLetterPage) {
	t.Helper()
	keys := func(f *worker.Flags) {
		f.APIKeys = "acme admin acme- sha256:" + workertest.KeyHash(acmeKey) + "; root admin * sha256:" + workertest.KeyHash(rootKey)
	}
	w := workertest.Start(t, keys, func(f *worker.Flags) { f.TenantRule = []string{"input:$.account"} })
	now := time.Now()
	for _, ev := range [][]byte{
		sfnEvent("ev-disguised", "acme-1", "beta-9-run", "FAILED", now, now, "boom"), // lists as acme-1, maps to beta-9
		sfnEvent("ev-hidden", "", "beta-7-run", "FAILED", now, now, "boom"),          // lists as no tenant
		sfnEvent("ev-own", "acme-4", "acme-4-run", "FAILED", now, now, "boom"),       // acme-4 either way
	} {
		if code := workertest.Post(t, w.HTTP.URL()+"/v1/ingest/eventbridge", ev, nil); code != http.StatusAccepted {
			t.Fatalf("ingest: %d", code)
		}
	}
	var all console.DeadLetterPage
	workertest.Eventually(t, func() string {
		all = deadLetters(t, w.HTTP.URL(), rootKey)
		if len(all.DeadLetters) != 3 {
			return fmt.Sprintf("%d dead letters, want 3", len(all.DeadLetters))
		}
		return ""
	})
	dir := w.Flags.DataDir
	w.Stop(t)
	w = workertest.Start(t, keys, workertest.DataDir(dir), func(f *worker.Flags) {
		f.TenantRule = []string{`name:^(?P<tenant>[a-z]+-[0-9]+)-run$`, "input:$.tenantId"}
	})
	return w, all
}

// deadLetters lists the dead letters with a key.
func deadLetters(tb testing.TB, url, key string) console.DeadLetterPage {
	tb.Helper()
	var page console.DeadLetterPage
	code, _, body := workertest.APIGet(tb, url+"/console/api/deadletters", key)
	if code != http.StatusOK {
		tb.Fatalf("dead letters: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		tb.Fatal(err)
	}
	return page
}

// requeue asks for dead letter seq to be requeued with a key.
func requeue(tb testing.TB, url string, seq uint64, key string) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/console/api/deadletters/%d/requeue", url, seq), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
