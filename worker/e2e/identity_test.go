package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

// stepFunctionsFor is the example Step Functions event for tenant (raw
// bytes, spliced into the JSON text of the input) under event id id.
func stepFunctionsFor(tb testing.TB, id, tenant string) []byte {
	tb.Helper()
	example := workertest.Example(tb, "stepfunctions-failed.json")
	body := strings.Replace(string(example), `\"tenantId\": \"acme\"`, `\"tenantId\": \"`+tenant+`\"`, 1)
	body = strings.Replace(body, `"id": "`, `"id": "`+id, 1)
	if !strings.Contains(body, tenant) || !strings.Contains(body, `"id": "`+id) {
		tb.Fatal("example event changed: cannot set the tenant and the id")
	}
	return []byte(body)
}

// The first and sixth reproductions through the real HTTP ingress
// and worker: tenant ids of 10,000 bytes and of 700 × "é" (1,400 bytes, a
// subject token of 4,200 once escaped), and two ids differing only in an
// invalid byte. The ingress does not resolve tenants (the rules live in
// the normalizer), so the long ids are accepted there and dead-lettered by
// the normalizer with the reason; a body that is not UTF-8 is refused at
// the ingress with 400 and kept as a dead letter. The NATS connection
// stays up, the worker keeps serving, the next good event reaches the
// view, and verify finds the view equal to the stream.
func TestHostileTenantIDs(t *testing.T) {
	w := workertest.Start(t)
	url := w.HTTP.URL() + "/v1/ingest/eventbridge"
	for i, tenant := range []string{strings.Repeat("a", 10000), strings.Repeat("é", 700)} {
		if code := workertest.Post(t, url, stepFunctionsFor(t, fmt.Sprint("long", i), tenant), nil); code != http.StatusAccepted {
			t.Fatalf("long tenant id %d: %d, want 202 (the normalizer resolves tenants)", i, code)
		}
	}
	for i, bad := range []string{"bad\xff", "bad\xfe"} {
		if code := workertest.Post(t, url, stepFunctionsFor(t, fmt.Sprint("utf8-", i), bad), nil); code != http.StatusBadRequest {
			t.Fatalf("tenant id %q: %d, want 400", bad, code)
		}
	}
	if code := workertest.Post(t, url, stepFunctionsFor(t, "good", "acme"), nil); code != http.StatusAccepted {
		t.Fatalf("good event: %d", code)
	}
	workertest.Eventually(t, func() string {
		if _, err := w.View.Tenant(t.Context(), "acme"); err != nil {
			return "acme: " + err.Error()
		}
		return ""
	})
	reasons := map[string][]string{}
	for _, m := range bustest.Msgs(t, w.Bus.JetStream, substate.StreamDLQ) {
		if len(m.Subject) > 64 {
			t.Errorf("dead-letter subject of %d bytes depends on content", len(m.Subject))
		}
		reasons[m.Header.Get(substate.HeaderDLQStage)] = append(reasons[m.Header.Get(substate.HeaderDLQStage)], m.Header.Get(substate.HeaderDLQReason))
	}
	norm, ingest := strings.Join(reasons[substate.StageNormalize], "\n"), strings.Join(reasons[substate.StageIngest], "\n")
	if len(reasons[substate.StageNormalize]) != 2 || strings.Count(norm, "longer than the maximum of 256") != 2 {
		t.Errorf("normalizer dead letters:\n%s\nwant the two long ids with the reason", norm)
	}
	if len(reasons[substate.StageIngest]) != 2 || strings.Count(ingest, "not valid UTF-8") != 2 {
		t.Errorf("ingest dead letters:\n%s\nwant the two invalid bodies with the reason", ingest)
	}
	if !w.Bus.Ready() {
		t.Fatal("the worker lost its NATS connection")
	}
	select {
	case <-w.Done():
		t.Fatalf("the worker stopped: %v", w.Wait(t))
	default:
	}
	verifyEqual(t, w)
}
