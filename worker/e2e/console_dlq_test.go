package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

func TestConsoleDeadLetters(t *testing.T) {
	// RequeueAsAdmin edits the running worker's tenant rules (what a
	// restart with new flags does); the evidence check, which reads them,
	// is off so that edit races with nothing.
	w := workertest.Start(t, func(f *worker.Flags) {
		f.RedactAllow = []string{"$.order.id"}
		f.EvidenceCheckInterval = 0
	})
	cw := &consoleWorker{Worker: w, url: w.HTTP.URL(), t0: time.Now().Add(-time.Hour)}
	// An execution whose input names no tenant: the worker's rules cannot
	// place it, so it is dead-lettered with its raw message kept.
	body := sfnEvent("evt-lost", "", "wonka-run", "FAILED", cw.t0, time.Now(), "<b>oops</b>")
	body = []byte(strings.Replace(string(body), `{\"tenantId\":\"\"}`, `{\"secret\":\"hunter2\",\"order\":{\"id\":\"ord-7\"}}`, 1))
	if code := workertest.Post(t, cw.url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	var page console.DeadLetterPage
	workertest.Eventually(t, func() string {
		if code := workertest.GetJSON(t, cw.url+"/console/api/deadletters", &page); code != 200 || len(page.DeadLetters) != 1 {
			return fmt.Sprintf("HTTP %d, %d dead letters", code, len(page.DeadLetters))
		}
		return ""
	})
	d := page.DeadLetters[0]
	if d.Stage != "normalize" || d.RawSeq == 0 || !d.Redacted || !strings.Contains(d.Reason, "tenant") {
		t.Fatalf("dead letter %+v", d)
	}
	if strings.Contains(string(d.Payload), "hunter2") {
		t.Fatalf("the payload shows the execution input to a reader: %s", d.Payload)
	}
	if !strings.Contains(string(d.Payload), "ord-7") {
		t.Fatalf("the payload hides the field --redact-allow shows: %s", d.Payload)
	}

	t.Run("ErrRequeueNeedsAdmin", func(t *testing.T) {
		resp, err := http.Post(cw.url+fmt.Sprintf("/console/api/deadletters/%d/requeue", d.Seq), "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("requeue without a key: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("Page", func(t *testing.T) {
		ctx := newBrowser(t)
		run(t, ctx, "open dead letters", chromedp.Navigate(cw.url+"/#/deadletters"))
		waitJS(t, ctx, 10*time.Second, `document.querySelectorAll('#deadletters tbody tr').length === 1`)
		var got struct{ Stage, Reason, Payload string }
		eval(t, ctx, `(() => { const r = document.querySelector('#deadletters tbody tr').children; return {Stage: r[1].textContent, Reason: r[2].textContent, Payload: r[4].textContent} })()`, &got)
		if got.Stage != "normalize" || got.Reason != d.Reason || !strings.Contains(got.Payload, "redacted") || strings.Contains(got.Payload, "hunter2") {
			t.Fatalf("row %+v", got)
		}
		waitJS(t, ctx, 10*time.Second, `document.getElementById('dlq-size').textContent === '1'`)
		// The loopback caller without a key is read:raw: a requeue would
		// be refused, so there is no button for it.
		var buttons int
		eval(t, ctx, `document.querySelectorAll('#deadletters button').length`, &buttons)
		if buttons != 0 {
			t.Fatalf("%d requeue buttons shown to the anonymous loopback caller, who would get 403", buttons)
		}
	})

	// The operator fixes the tenant rules and requeues with an admin key:
	// the raw message is mapped again and the tenant appears.
	t.Run("RequeueAsAdmin", func(t *testing.T) {
		const key = "admin-key-0123456789abcdef0123456789"
		sum := sha256.Sum256([]byte(key))
		const readKey = "read-key-0123456789abcdef0123456789"
		readSum := sha256.Sum256([]byte(readKey))
		keys := &httpapi.Keys{Text: "root admin * sha256:" + hex.EncodeToString(sum[:]) + "; viewer read * sha256:" + hex.EncodeToString(readSum[:])}
		if err := keys.Load(); err != nil {
			t.Fatal(err)
		}
		w.Flags.TenantRule = []string{"input:$.tenantId", `name:^(?P<tenant>[a-z]+)-run$`}
		c := &console.Console{JS: w.Bus.JetStream, Requeue: w.RequeueRaw}
		if err := c.Open(); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		srv := httptest.NewServer((&httpapi.Server{Console: c, Auth: &httpapi.Authorizer{Keys: keys}}).Handler())
		defer srv.Close()
		list := func(key string) console.DeadLetterPage {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/console/api/deadletters", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var page console.DeadLetterPage
			if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
				t.Fatalf("dead letters: %d %v", resp.StatusCode, err)
			}
			return page
		}
		if admin := list(key); len(admin.DeadLetters) != 1 || admin.DeadLetters[0].Redacted || !strings.Contains(string(admin.DeadLetters[0].Payload), "hunter2") {
			t.Fatalf("admin sees %+v", admin)
		}
		if reader := list(readKey); len(reader.DeadLetters) != 1 || !reader.DeadLetters[0].Redacted || reader.DeadLetters[0].Payload != nil {
			t.Fatalf("a read key (no read:raw) sees %+v, want the dead letter without its payload", reader)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+fmt.Sprintf("/console/api/deadletters/%d/requeue", d.Seq), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Published int }
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 || out.Published != 1 {
			t.Fatalf("requeue: %d %+v", resp.StatusCode, out)
		}
		cw.tenantIs(t, "wonka", substate.StateFailed)
	})
}
