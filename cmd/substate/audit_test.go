package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

// story is a tenant's provisioning: a payment task that fails, backs off,
// retries, fails for good; a duplicate and a late event in between; then a
// second run, and a late success of the first that must not resurrect it.
var story = []engineStep{
	{"run-1", 1, "running", 0, ""},
	{"run-1", 2, "error", 0, "card declined"},
	{"run-1", 3, "backing-off", 1, "card declined"},
	{"run-1", 4, "running", 1, ""},
	{"run-1", 2, "error", 0, "card declined"}, // redelivered late
	{"run-1", 5, "running", 1, ""},            // newer, nothing to write
	{"run-1", 6, "failed", 1, "payment provider returned HTTP 503"},
	{"run-2", 1, "running", 0, ""},
	{"run-1", 7, "succeeded", 1, ""}, // late, of the older run
}

// rerun is a run that fails, is resumed under the same execution id (as a
// Step Functions redrive is) and succeeds; its failure arrives again late.
// The success ends the same execution: it is no newer one, though it
// clears the execution id from the view.
var rerun = []engineStep{
	{"run-1", 1, "running", 0, ""},
	{"run-1", 2, "failed", 0, "quota exceeded"},
	{"run-1", 3, "running", 0, ""},
	{"run-1", 4, "succeeded", 0, ""},
	{"run-1", 2, "failed", 0, "quota exceeded"}, // redelivered late
}

func TestAuditGolden(t *testing.T) {
	b := newTestBus(t)
	publishStory(t, b, "acme corp", story)
	publishMsg(t, b, substate.EventsSubject("acme corp"), "{not a cloudevent")
	publishStory(t, b, "other", story[:1])
	url, nkey := b.ClientURL(), bustest.Seed(t, b, bus.Worker)

	code, out, errOut := runCLI(t, "audit", "--tenant", "acme corp", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	golden(t, "audit.txt", out)
	code, out, errOut = runCLI(t, "audit", "--tenant", "acme corp", "--raw", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit --raw: exit %d: %s", code, errOut)
	}
	golden(t, "audit-raw.txt", out)

	publishStory(t, b, "hooli", rerun)
	code, out, errOut = runCLI(t, "audit", "--tenant", "hooli", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	golden(t, "audit-rerun.txt", out)

	code, out, _ = runCLI(t, "audit", "--tenant", "acme corp", "--json", "--raw", "--nats-url", url, "--nats-nkey", nkey)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(story)+1 {
		t.Fatalf("audit --json: exit %d, %d lines", code, len(lines))
	}
	var last substate.Transition // of the story; the invalid message follows it
	if err := json.Unmarshal([]byte(lines[len(lines)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Outcome != substate.OutcomeStale || last.New.SubState != substate.StateRunning || last.Raw == nil || last.Raw.Missing != "" {
		t.Errorf("last transition %+v", last)
	}
}

func TestAuditRanges(t *testing.T) {
	b := newTestBus(t)
	publishStory(t, b, "acme", story)
	url, nkey := b.ClientURL(), bustest.Seed(t, b, bus.Worker)
	code, out, _ := runCLI(t, "audit", "--tenant", "acme", "--since", "1h", "--nats-url", url, "--nats-nkey", nkey)
	if code != 0 || !strings.Contains(out, "acme: 9 events") {
		t.Fatalf("--since 1h: exit %d\n%s", code, out)
	}
	code, _, errOut := runCLI(t, "audit", "--tenant", "acme", "--until", "2001-01-01", "--nats-url", url, "--nats-nkey", nkey)
	if code != 1 || !strings.Contains(errOut, "no events of tenant") {
		t.Fatalf("--until before everything: exit %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "audit", "--tenant", "acme", "--since", "last tuesday", "--nats-url", url, "--nats-nkey", nkey)
	if code != 1 || !strings.Contains(errOut, "--since") {
		t.Fatalf("bad --since: exit %d %s", code, errOut)
	}
}

// TestHistoryRoute reads the same story through the worker's HTTP API.
func TestHistoryRoute(t *testing.T) {
	w := startWorker(t, t.TempDir())
	publishStory(t, w.Bus, "acme", story)
	base := w.HTTP.URL() + "/v1/tenants/acme/history"

	var page substate.HistoryPage
	if code := getPage(t, base+"?limit=4&raw=true", &page); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if len(page.Transitions) != 4 || page.NextAfterSeq != page.Transitions[3].Seq || page.Transitions[0].Raw == nil {
		t.Fatalf("first page: %d transitions, next %d", len(page.Transitions), page.NextAfterSeq)
	}
	var rest substate.HistoryPage
	getPage(t, base+"?afterSeq="+strconv.FormatUint(page.NextAfterSeq, 10), &rest)
	if len(rest.Transitions) != len(story)-4 || rest.NextAfterSeq != 0 || rest.Transitions[0].Raw != nil {
		t.Fatalf("second page: %d transitions, next %d", len(rest.Transitions), rest.NextAfterSeq)
	}
	if got := rest.Transitions[len(rest.Transitions)-1]; got.Outcome != substate.OutcomeStale {
		t.Errorf("last outcome %q", got.Outcome)
	}
	if code := getPage(t, base+"?since=yesterday-ish", &page); code != http.StatusBadRequest {
		t.Errorf("bad since: status %d", code)
	}
	var empty substate.HistoryPage
	if code := getPage(t, w.HTTP.URL()+"/v1/tenants/nobody/history", &empty); code != http.StatusOK || empty.Transitions == nil {
		t.Errorf("unknown tenant: status %d, %+v", code, empty)
	}
}

// getPage GETs url and decodes a 200 answer into v; it returns the status.
func getPage(tb testing.TB, url string, v any) int {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			tb.Fatal(err)
		}
	}
	return resp.StatusCode
}
