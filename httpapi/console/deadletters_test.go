package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/redact"
	"github.com/substatehq/substate/testkit/bustest"
)

// TestDeadLetterList lists a real SUBSTATE_DLQ for the anonymous
// read:raw caller: newest first, paged, payloads redacted, and one larger
// than a page carries left out with the reason.
func TestDeadLetterList(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	dead := func(body string) {
		t.Helper()
		m := nats.NewMsg(substate.DLQSubject("normalize"))
		m.Header.Set(substate.HeaderDLQStage, "normalize")
		m.Header.Set(substate.HeaderDLQReason, "tenant_unresolved")
		m.Header.Set(substate.HeaderDLQSubject, substate.SubjectRawPrefix+"stepfunctions.eventbridge")
		m.Header.Set(substate.HeaderDLQSeq, "7")
		m.Data = []byte(body)
		if _, err := b.JetStream.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	dead(`{"detail":{"input":"{\"tenantId\":\"acme-1\",\"password\":\"hunter2\"}"}}`)
	dead(`{"detail":{"input":"` + strings.Repeat("x", maxListedPayload) + `"}}`)
	dead("not json hunter2")

	policy, err := redact.New(nil, []string{"$.tenantId"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Console{JS: b.JetStream, Redact: policy}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c}).Handler())
	defer srv.Close()
	list := func(query string) DeadLetterPage {
		t.Helper()
		resp, err := http.Get(srv.URL + "/console/api/deadletters" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page DeadLetterPage
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", query, resp.StatusCode, err)
		}
		return page
	}

	page := list("")
	if len(page.DeadLetters) != 3 || page.Before != 0 {
		t.Fatalf("%d dead letters, before %d; want 3, no older page", len(page.DeadLetters), page.Before)
	}
	notJSON, big, small := page.DeadLetters[0], page.DeadLetters[1], page.DeadLetters[2]
	if notJSON.Seq != 3 || string(notJSON.Payload) != `"`+redact.Redacted+`"` || !notJSON.Redacted {
		t.Errorf("the payload that is not JSON: %+v", notJSON)
	}
	if big.Payload != nil || !strings.Contains(big.PayloadOmitted, "substate events dlq --json") {
		t.Errorf("the payload larger than a page carries: %d bytes listed, omitted %q", len(big.Payload), big.PayloadOmitted)
	}
	if s := string(small.Payload); small.TenantID != "acme-1" || small.RawSeq != 7 || strings.Contains(s, "hunter2") || !strings.Contains(s, "acme-1") {
		t.Errorf("the small payload: %+v %s", small, s)
	}

	older := list("?limit=2")
	if len(older.DeadLetters) != 2 || older.DeadLetters[0].Seq != 3 || older.Before != 2 {
		t.Fatalf("limit 2: %+v", older)
	}
	if rest := list("?limit=2&before=2"); len(rest.DeadLetters) != 1 || rest.DeadLetters[0].Seq != 1 || rest.Before != 0 {
		t.Fatalf("the older page: %+v", rest)
	}
	for _, query := range []string{"?befor=2", "?limit=1&limit=2", "?limit=0", "?before=x"} {
		resp, err := http.Get(srv.URL + "/console/api/deadletters" + query)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != substate.EINVALID || e.Error.Message == "" {
			t.Errorf("GET %s: %d %+v, want 400 saying why", query, resp.StatusCode, e)
		}
	}
}
