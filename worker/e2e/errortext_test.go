package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestSecretsInErrorText: providers' error text carries secrets too. A
// Step Functions failure whose cause and a Restate retry whose
// last_failure say "password hunter2" reached read keys (the view,
// history), the change feed and the logs. Now the canonical events carry
// "password [redacted]", so none of those holds the password (the logs'
// view-change lines carry the redacted text); the raw evidence keeps it
// for an admin key.
func TestSecretsInErrorText(t *testing.T) {
	const readKey, adminKey = "read-key-0123456789abcdef0123456789", "admin-key-0123456789abcdef0123456789"
	w := workertest.Start(t, func(f *worker.Flags) {
		f.APIKeys = "reader read * sha256:" + workertest.KeyHash(readKey) + "; ops admin * sha256:" + workertest.KeyHash(adminKey)
	})
	url := w.HTTP.URL()
	now := time.Now()
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge",
		sfnEvent("ev-secret", "acme-sfn", "acme-sfn-run", "FAILED", now.Add(-time.Minute), now, "connect: password hunter2 rejected"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	row := consoleRestateRow("inv_secret", "acme-restate", "backing-off", now, 2, "db login failed: password hunter2")
	if err := workertest.DeliverRow(url, "wh-secret", row); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme-sfn", "acme-restate"} {
		workertest.Eventually(t, func() string {
			code, _, body := workertest.APIGet(t, url+"/v1/tenants/"+tenant, readKey)
			if code != http.StatusOK || !strings.Contains(body, "password [redacted]") {
				return fmt.Sprintf("tenant %s as a read key: %d %s, want the error with the password redacted", tenant, code, body)
			}
			return ""
		})
		for _, path := range []string{"/v1/tenants/" + tenant, "/v1/tenants/" + tenant + "/history"} {
			if _, _, body := workertest.APIGet(t, url+path, readKey); strings.Contains(body, "hunter2") {
				t.Errorf("GET %s shows a read key the password: %s", path, body)
			}
		}
		if _, _, body := workertest.APIGet(t, url+"/v1/tenants/"+tenant+"/history?raw=true", adminKey); !strings.Contains(body, "hunter2") {
			t.Errorf("the raw evidence lost the provider's text for admin: %s", body)
		}
	}
	workertest.Eventually(t, func() string {
		if n, _ := w.View.OutboxLen(); n > 0 {
			return fmt.Sprintf("%d changes wait in the outbox", n)
		}
		return ""
	})
	for _, stream := range []string{substate.StreamEvents, substate.StreamChanges} {
		for _, m := range bustest.Msgs(t, w.Bus.JetStream, stream) {
			if strings.Contains(string(m.Data), "hunter2") {
				t.Errorf("%s carries the password: %s", stream, m.Data)
			}
		}
	}
	// The projector logs each view change with its error: those lines are
	// there, with the password redacted, so the absence of the password in
	// the logs is not merely the absence of the lines that carried it.
	logs := w.Logs()
	for _, want := range []string{
		`tenant=acme-sfn old="" new=failed`, `error="connect: password [redacted] rejected"`,
		`tenant=acme-restate old="" new=backing-off`, `error="db login failed: password [redacted]"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line with %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "hunter2") {
		t.Errorf("the logs carry the password:\n%s", logs)
	}
}

// TestHostileIDs: a tenant id with a bidirectional override (U+202E,
// which makes "acme‮gpj.exe" read as another id in a table or a log) was
// accepted as a tenant, and a 5,000-byte webhook-id became a Nats-Msg-Id.
// The tenant id is now dead-lettered like one with a control character,
// and the webhook-id is refused with 400 before the body is read.
func TestHostileIDs(t *testing.T) {
	w := workertest.Start(t)
	url := w.HTTP.URL()
	now := time.Now()
	bidi := "acme\u202egpj.exe"
	if code := workertest.Post(t, url+"/v1/ingest/eventbridge", sfnEvent("ev-bidi", bidi, "bidi-run", "RUNNING", now, now, ""), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	var page console.DeadLetterPage
	workertest.Eventually(t, func() string {
		if code := workertest.GetJSON(t, url+"/console/api/deadletters", &page); code != http.StatusOK || len(page.DeadLetters) != 1 {
			return fmt.Sprintf("dead letters: %d %+v", code, page.DeadLetters)
		}
		return ""
	})
	if d := page.DeadLetters[0]; d.Stage != substate.StageNormalize || !strings.Contains(d.Reason, "U+202E") {
		t.Fatalf("dead letter %+v, want the normalizer's naming U+202E", d)
	}
	if code, body := workertest.Get(t, url+"/v1/tenants"); code != http.StatusOK || strings.Contains(body, "gpj") {
		t.Fatalf("tenants: %d %s, want no tenant with the override", code, body)
	}

	before := streamCounts(t, w)
	for _, id := range []string{strings.Repeat("x", 5000), "msg 1", "msg\u202e1"} {
		err := workertest.DeliverRow(url, id, consoleRestateRow("inv_id", "acme-id", "running", now, 0, ""))
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("webhook-id %.20q…: %v, want 400", id, err)
		}
	}
	if got := streamCounts(t, w); got != before {
		t.Errorf("streams %v after refused webhook-ids, want %v", got, before)
	}
}
