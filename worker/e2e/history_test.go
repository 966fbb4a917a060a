package e2e_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestHistoryRoute reads a tenant's story through the worker's HTTP API,
// page by page, as "substate audit" tells it from the streams.
func TestHistoryRoute(t *testing.T) {
	w := workertest.Start(t)
	workertest.PublishStory(t, w.Bus, "acme", workertest.Story)
	base := w.HTTP.URL() + "/v1/tenants/acme/history"

	var page substate.HistoryPage
	if code := workertest.GetJSON(t, base+"?limit=4&raw=true", &page); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if len(page.Transitions) != 4 || page.NextAfterSeq != page.Transitions[3].Seq || page.Transitions[0].Raw == nil {
		t.Fatalf("first page: %d transitions, next %d", len(page.Transitions), page.NextAfterSeq)
	}
	var rest substate.HistoryPage
	workertest.GetJSON(t, base+"?afterSeq="+strconv.FormatUint(page.NextAfterSeq, 10), &rest)
	if len(rest.Transitions) != len(workertest.Story)-4 || rest.NextAfterSeq != 0 || rest.Transitions[0].Raw != nil {
		t.Fatalf("second page: %d transitions, next %d", len(rest.Transitions), rest.NextAfterSeq)
	}
	if got := rest.Transitions[len(rest.Transitions)-1]; got.Outcome != substate.OutcomeStale {
		t.Errorf("last outcome %q", got.Outcome)
	}
	if code := workertest.GetJSON(t, base+"?since=yesterday-ish", &page); code != http.StatusBadRequest {
		t.Errorf("bad since: status %d", code)
	}
	var empty substate.HistoryPage
	if code := workertest.GetJSON(t, w.HTTP.URL()+"/v1/tenants/nobody/history", &empty); code != http.StatusOK || empty.Transitions == nil {
		t.Errorf("unknown tenant: status %d, %+v", code, empty)
	}
}
