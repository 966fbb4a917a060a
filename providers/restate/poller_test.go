package restate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

const (
	restateInvocation = "inv_15QQc9x1S87U4ClHS47MkV9tT9WnzYV5FK" // the recorded backing-off and completed rows
	restateTenant     = "globex"                                 // their target_service_key
)

// restateAdmin is a Restate admin API that answers POST /query on
// sys_invocation from fixture rows, and can be told to fail.
type restateAdmin struct {
	*httptest.Server

	mu      sync.Mutex
	rows    map[string]json.RawMessage // by invocation id
	queries []string
	fail    func() (status int, body []byte) // nil: answer
	refuse  string                           // an id whose every query fails, as Restate fails one it cannot parse
	// discovered answers the next discovery query.
	discovered []json.RawMessage
}

func newRestateAdmin(tb testing.TB) *restateAdmin {
	tb.Helper()
	a := &restateAdmin{rows: map[string]json.RawMessage{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	tb.Cleanup(a.Close)
	return a
}

// setRow makes the admin API answer with the row of a fixture.
func (a *restateAdmin) setRow(tb testing.TB, fixture string) {
	tb.Helper()
	var page struct{ Rows []json.RawMessage }
	if err := json.Unmarshal(fixtures.Provider(fixture), &page); err != nil {
		tb.Fatal(err)
	}
	var row struct{ ID string }
	if err := json.Unmarshal(page.Rows[0], &row); err != nil {
		tb.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows[row.ID] = page.Rows[0]
}

// setRowWith makes the admin API answer with the row of a fixture as
// change leaves it, and returns the fixture's page with that row.
func (a *restateAdmin) setRowWith(tb testing.TB, fixture string, change func(map[string]any)) []byte {
	tb.Helper()
	var page struct{ Rows []map[string]any }
	if err := json.Unmarshal(fixtures.Provider(fixture), &page); err != nil {
		tb.Fatal(err)
	}
	change(page.Rows[0])
	row, err := json.Marshal(page.Rows[0])
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"rows": []json.RawMessage{row}})
	if err != nil {
		tb.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows[page.Rows[0]["id"].(string)] = row
	return body
}

func (a *restateAdmin) setFail(f func() (int, []byte)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = f
}

// Queries returns the SQL received so far.
// discover makes the next discovery query answer rows, and the later
// ones none.
func (a *restateAdmin) discover(rows ...json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.discovered = rows
}

func (a *restateAdmin) Queries() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.queries)
}

var quotedIDs = regexp.MustCompile(`'([^']*)'`)

func (a *restateAdmin) serve(w http.ResponseWriter, r *http.Request) {
	var req map[string]string
	if r.Method != http.MethodPost || r.URL.Path != "/query" || r.Header.Get("Accept") != "application/json" ||
		r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req) != 1 {
		http.Error(w, `{"message":"bad request"}`, http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queries = append(a.queries, req["query"])
	if a.refuse != "" && strings.Contains(req["query"], a.refuse) {
		http.Error(w, `{"message":"Datafusion error: External error: non valid invocation id"}`, http.StatusInternalServerError)
		return
	}
	if a.fail != nil {
		status, body := a.fail()
		w.WriteHeader(status)
		w.Write(body)
		return
	}
	if strings.Contains(req["query"], "target_service_name IN") {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"rows": a.discovered})
		a.discovered = nil
		return
	}
	_, in, _ := strings.Cut(req["query"], " WHERE id IN (")
	rows := []json.RawMessage{}
	for _, m := range quotedIDs.FindAllStringSubmatch(in, -1) {
		if row, ok := a.rows[m[1]]; ok {
			rows = append(rows, row)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"rows": rows})
}

// applyRestate applies, as the projector would, a running Restate event for
// the tenant's invocation that occurred at the given time.
func applyRestate(tb testing.TB, view *state.DB, tenant, invocation string, seq uint64, at time.Time) {
	tb.Helper()
	ev := substate.EventData{TenantID: tenant, Provider: substate.ProviderRestate, ExecutionID: invocation, Workflow: "OrderWorkflow",
		SubState: substate.StateRunning, ProviderState: "running", OccurredAt: at, ExecutionStartedAt: at,
		Revision: substate.Revision(at.UnixMilli())}
	ev.Normalize()
	if _, err := view.Apply(context.Background(), []substate.Sequenced{{Seq: seq, Event: ev}}); err != nil {
		tb.Fatal(err)
	}
}

func newRestatePoller(url string, view substate.ActiveLister, pub substate.RawPublisher, clock *pipelinetest.Clock) *restate.Poller {
	p := restate.NewPoller(restate.NewClient(url), view, pub)
	p.Now, p.Sleep = clock.Now, clock.Sleep
	return p
}

// rawPublisherFunc is a substate.RawPublisher made of a function.
type rawPublisherFunc func(ctx context.Context, raw substate.RawEvent) error

func (f rawPublisherFunc) PublishRaw(ctx context.Context, raw substate.RawEvent) error {
	return f(ctx, raw)
}

func TestRestatePollerFixtureRowsReachTheView(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	admin := newRestateAdmin(t)
	clock := pipelinetest.NewClock(time.Now().Add(time.Hour)) // after the recorded rows
	// A webhook told the view the invocation is backing off (a row recorded
	// from a real server: retry_count 2, the second attempt failed).
	backingOff := fixtures.Provider("restate-invocation-backing-off.json")
	p.Publish(t, substate.RawEvent{Kind: substate.RawRestate, ID: "msg_webhook_1", Body: backingOff})
	v := p.WaitTenant(t, restateTenant, "backing-off", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateBackingOff })
	if v.WorkflowRetryCount != 2 || v.WorkflowErrorMessage != "downstream unavailable (attempt 2)" {
		t.Fatalf("view = retries %d, error %q; want 2 and the message without its stack trace", v.WorkflowRetryCount, v.WorkflowErrorMessage)
	}

	sends := 0
	pub := rawPublisherFunc(func(ctx context.Context, raw substate.RawEvent) error {
		sends++
		return p.Pub.PublishRaw(ctx, raw)
	})
	poller := newRestatePoller(admin.URL, p.View, pub, clock)
	admin.setRow(t, "restate-invocation-backing-off.json")
	for i := range 3 { // the next polls find the same row: not sent again
		if res, err := poller.Sweep(ctx); err != nil || res.Polled != 1 || (res.Published == 1) != (i == 0) || sends != 1 {
			t.Fatalf("sweep %d = %+v, %v, %d publishes; want the row published once", i, res, err, sends)
		}
	}
	if got := bustest.Count(t, p.Bus.JetStream, substate.StreamRaw); got != 2 {
		t.Fatalf("raw stream holds %d messages, want 2: the webhook and one poll of the unchanged row", got)
	}

	admin.setRow(t, "restate-invocation-completed-success.json")
	if _, err := poller.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	v = p.WaitTenant(t, restateTenant, "succeeded", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	if v.WorkflowErrorMessage != "" || v.WorkflowRetryCount != 0 {
		t.Fatalf("succeeded view = retries %d, error %q; want both cleared", v.WorkflowRetryCount, v.WorkflowErrorMessage)
	}

	// The row with a retry_count, first seen, has its journal read once
	// (a pause and resume before it would restart its retry_count).
	want := "FROM sys_invocation WHERE id IN ('" + restateInvocation + "')"
	journal := "FROM sys_journal_events WHERE id = '" + restateInvocation + "'"
	journals := 0
	for _, q := range admin.Queries() {
		if strings.Contains(q, journal) {
			journals++
		} else if !strings.Contains(q, want) {
			t.Fatalf("query %q does not ask for the tracked invocation", q)
		}
	}
	if journals != 1 {
		t.Fatalf("the journal was read %d times, want once", journals)
	}
	if res, err := poller.Sweep(ctx); err != nil || res.Stale != 0 || len(admin.Queries()) != 5 {
		t.Fatalf("sweep after success = %+v, %v; want no query for a finished invocation", res, err)
	}
}

// validID is a well-formed invocation id, different for each i.
func validID(i int) string { return fmt.Sprintf("inv_1%011d%022d", i, i) }

func TestRestatePollerBatches(t *testing.T) {
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	admin := newRestateAdmin(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 5, 0, 0, time.UTC))
	for i := range 5 {
		applyRestate(t, view, string(rune('a'+i)), validID(i), uint64(i+1), clock.Now().Add(-time.Minute))
	}
	poller := newRestatePoller(admin.URL, view, publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	poller.BatchSize = 2
	res, err := poller.Sweep(ctx)
	if err != nil || res.Polled != 5 || res.Failed != 5 {
		t.Fatalf("sweep = %+v, %v; want 5 asked about, none found", res, err)
	}
	if got := len(admin.Queries()); got != 3 {
		t.Fatalf("queries = %d, want 3 batches of at most 2", got)
	}
}

// TestRestatePollerIsolatesARefusedID gives the poller a batch in which the
// admin API refuses one id: the batch is split, the other invocations are
// read in the same sweep, and the refused one's tenant gets a dead letter.
func TestRestatePollerIsolatesARefusedID(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	admin := newRestateAdmin(t)
	clock := pipelinetest.NewClock(time.Now().Add(time.Hour))
	for i := range 7 {
		applyRestate(t, p.View, fmt.Sprintf("t%d", i), validID(i), uint64(i+1), clock.Now().Add(-time.Minute))
	}
	admin.refuse = validID(3)
	poller := newRestatePoller(admin.URL, p.View, p.Pub, clock)
	poller.DeadLetters = p.Pub
	res, err := poller.Sweep(ctx)
	if err != nil || res.Polled != 7 || res.Failed != 7 {
		t.Fatalf("sweep = %+v, %v; want all 7 asked about (6 not found, 1 refused) and no error", res, err)
	}
	// 7 ids refused; 3 answered, 4 refused; 2 refused, 2 answered; 1 refused, 1 answered.
	if got := len(admin.Queries()); got != 7 {
		t.Fatalf("%d queries, want the batch split down to the refused id: 7", got)
	}
	if !dlqHas(t, p, validID(3), "refuses to query invocation") || !dlqHas(t, p, "t3", "refuses") {
		t.Fatal("no dead letter for the refused invocation's tenant")
	}
	// The refused id is not asked about again until its delay has passed
	// (an interval, doubling with each refusal); the others are. Asked
	// again, it is in the 4 queries that split the batch down to it.
	asked := func() (refused, others int) {
		for _, q := range admin.Queries() {
			if strings.Contains(q, validID(3)) {
				refused++
			} else {
				others++
			}
		}
		return refused, others
	}
	for _, step := range []struct {
		advance     time.Duration
		wantRefused int
	}{{time.Second, 4}, {poller.Interval, 8}, {poller.Interval, 8}, {poller.Interval, 12}} {
		clock.Advance(step.advance)
		if _, err := poller.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if refused, _ := asked(); refused != step.wantRefused {
			t.Fatalf("after %s: the refused id was in %d queries, want %d", step.advance, refused, step.wantRefused)
		}
	}
}

func TestRestatePollerFailures(t *testing.T) {
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 5, 0, 0, time.UTC))
	applyRestate(t, view, restateTenant, restateInvocation, 1, clock.Now().Add(-time.Minute))
	applyRestate(t, view, "mallory", "inv_x'); DROP TABLE state; --", 2, clock.Now().Add(-time.Minute))
	admin := newRestateAdmin(t)
	pub := publishers.NewJetStream(bustest.Open(t).JetStream)
	var logs pipelinetest.Logs
	newPoller := func(url string) *restate.Poller {
		logs = pipelinetest.Logs{}
		p := newRestatePoller(url, view, pub, clock)
		p.Logger, p.Metrics = logs.Logger(), reconcile.NewMetrics(nil)
		p.Admin.Metrics = p.Metrics
		return p
	}

	t.Run("ErrorBody", func(t *testing.T) {
		admin.setFail(func() (int, []byte) { return http.StatusBadRequest, fixtures.Provider("restate-query-error.json") })
		defer admin.setFail(nil)
		poller := newPoller(admin.URL)
		_, err := poller.Sweep(ctx)
		if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "No field named retries") {
			t.Fatalf("err = %v, want EINVALID with the admin API's message", err)
		}
		if got := pipelinetest.Counter(t, poller.Metrics.Polls, "restate", substate.EINVALID); got != 1 {
			t.Fatalf("failed polls counted = %v", got)
		}
		if got := pipelinetest.Counter(t, poller.Metrics.APICalls, "restate", "query"); got != 1 {
			t.Fatalf("queries counted = %v", got)
		}
	})
	t.Run("AnswerTooLarge", func(t *testing.T) {
		huge := append([]byte(`{"rows":[],"pad":"`), bytes.Repeat([]byte("x"), 32<<20)...)
		admin.setFail(func() (int, []byte) { return http.StatusOK, append(huge, `"}`...) })
		defer admin.setFail(nil)
		_, err := newPoller(admin.URL).Sweep(ctx)
		if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "more than 32 MiB") {
			t.Fatalf("err = %v, want EINVALID naming the size limit", err)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		_, err := newPoller(gone.URL).Sweep(ctx)
		if substate.ErrorCode(err) != substate.EUNAVAILABLE {
			t.Fatalf("err = %v, want EUNAVAILABLE", err)
		}
	})
	t.Run("MissingAndInvalidLoggedOnce", func(t *testing.T) {
		poller := newPoller(admin.URL)
		for range 3 {
			if res, err := poller.Sweep(ctx); err != nil || res.Failed != 1 || res.Stale != 2 {
				t.Fatalf("sweep = %+v, %v", res, err)
			}
		}
		if got := logs.Count(restateInvocation); got != 1 {
			t.Fatalf("the missing invocation was logged %d times, want once", got)
		}
		if got := logs.Count("mallory"); got != 1 {
			t.Fatalf("the invalid invocation id was logged %d times, want once", got)
		}
		for _, q := range admin.Queries() {
			if strings.Contains(q, "DROP") {
				t.Fatalf("an invalid id reached the query: %s", q)
			}
		}
	})
	t.Run("RunRetriesWithBackoff", func(t *testing.T) {
		admin.setRow(t, "restate-invocation-running.json")
		failures := 3
		admin.setFail(func() (int, []byte) {
			if failures == 0 {
				return http.StatusOK, []byte(`{"rows":[]}`)
			}
			failures--
			return http.StatusServiceUnavailable, []byte(`{"message":"the cluster is starting"}`)
		})
		defer admin.setFail(nil)
		poller := newPoller(admin.URL)
		runCtx, cancel := context.WithCancel(ctx)
		var waits []time.Duration
		poller.Sleep = func(ctx context.Context, d time.Duration) error {
			if waits = append(waits, d); len(waits) == 5 {
				cancel()
			}
			return clock.Sleep(ctx, d)
		}
		if err := poller.Run(runCtx); err != nil {
			t.Fatalf("run = %v, want nil once the context ends", err)
		}
		i := poller.Interval
		if got, want := fmtDurations(waits), fmtDurations([]time.Duration{i, 2 * i, 4 * i, i, i}); got != want {
			t.Fatalf("waits = %s, want %s: doubling while the admin API fails, the interval once it answers", got, want)
		}
		if logs.Count("restate admin poll failed") < 3 || logs.Count("works again") != 1 {
			t.Fatalf("logs do not report the failures and the recovery")
		}
	})
}

func TestRestatePollerRetryDelay(t *testing.T) {
	p := restate.NewPoller(restate.NewClient("http://restate:9070"), nil, nil)
	p.Interval, p.MaxBackoff = 10*time.Second, time.Minute
	got := fmtDurations([]time.Duration{p.RetryDelay(1), p.RetryDelay(2), p.RetryDelay(3), p.RetryDelay(4), p.RetryDelay(40)})
	if want := "[10s 20s 40s 1m0s 1m0s]"; got != want {
		t.Fatalf("delays = %s, want %s", got, want)
	}
}

func fmtDurations(d []time.Duration) string {
	s := make([]string, len(d))
	for i := range d {
		s[i] = d[i].String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestRestatePollerDiscoveryCursor checks the discovery queries: the
// first reads every invocation not completed and those of the last hour,
// the next go on from the newest row read, a little before it.
func TestRestatePollerDiscoveryCursor(t *testing.T) {
	ctx := context.Background()
	admin := newRestateAdmin(t)
	clock := pipelinetest.NewClock(time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC))
	poller := newRestatePoller(admin.URL, pipelinetest.OpenView(t), publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	poller.Services = []string{"Provision", "O'Brien"}
	for range 3 {
		if _, err := poller.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(poller.Interval)
	}
	q := admin.Queries()
	if len(q) != 3 {
		t.Fatalf("%d queries, want one discovery a sweep", len(q))
	}
	for _, want := range []string{"target_service_name IN ('Provision', 'O''Brien')", "status <> 'completed'", "modified_at >= '2026-11-23T22:00:00.000Z'", "ORDER BY modified_at, id LIMIT 500"} {
		if !strings.Contains(q[0], want) {
			t.Errorf("first discovery %q lacks %q", q[0], want)
		}
	}
	// Nothing was found: the cursor stays at the lookback's start, and the
	// next discoveries go on from it, reading nothing twice.
	for _, sql := range q[1:] {
		if !strings.Contains(sql, "modified_at > '2026-11-23T22:00:00.000Z'") || strings.Contains(sql, "status <> 'completed'") {
			t.Errorf("later discovery %q does not go on from the cursor", sql)
		}
	}
}

// TestRestatePollerDiscoveryOverlap: a row changed just before a discovery
// may become visible just after it, so the next discovery reads the 2 s
// before the last one started once more; the one after goes on from the
// newest row read, and reads none of them again.
func TestRestatePollerDiscoveryOverlap(t *testing.T) {
	ctx := context.Background()
	admin := newRestateAdmin(t)
	start := time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC)
	clock := pipelinetest.NewClock(start)
	poller := newRestatePoller(admin.URL, pipelinetest.OpenView(t), publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	poller.Services = []string{"Provision"}
	id := validID(7)
	admin.discover(json.RawMessage(`{"id":"` + id + `","target":"Provision/acme/run","target_service_name":"Provision","target_service_key":"acme","status":"running","created_at":"2026-11-23T22:59:59.000Z","modified_at":"2026-11-23T22:59:59.500Z"}`))
	for range 3 {
		if _, err := poller.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(poller.Interval)
	}
	var discoveries []string
	for _, q := range admin.Queries() {
		if strings.Contains(q, "target_service_name IN") {
			discoveries = append(discoveries, q)
		}
	}
	if len(discoveries) != 3 {
		t.Fatalf("%d discoveries, want 3: %q", len(discoveries), discoveries)
	}
	if want := "modified_at > '2026-11-23T22:59:58.000Z' OR (modified_at = '2026-11-23T22:59:58.000Z' AND id > '')"; !strings.Contains(discoveries[1], want) {
		t.Errorf("second discovery %q does not read again from 2 s before the first one: want %q", discoveries[1], want)
	}
	if want := "modified_at > '2026-11-23T22:59:59.500Z' OR (modified_at = '2026-11-23T22:59:59.500Z' AND id > '" + id + "')"; !strings.Contains(discoveries[2], want) {
		t.Errorf("third discovery %q does not go on from the newest row: want %q", discoveries[2], want)
	}
}

// TestRestatePollerRetryJumpReadsNoJournal: a retry_count that moved up by
// more than one between two polls under the same modified_at is exact as
// the row says (Restate moves modified_at on a pause, resume, cancel or
// completion, not between attempts), so the view takes the row's count and
// last_failure and the journal is not read for it; a row at a new
// modified_at has its journal read again.
func TestRestatePollerRetryJumpReadsNoJournal(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	admin := newRestateAdmin(t)
	clock := pipelinetest.NewClock(time.Now().Add(time.Hour)) // after the recorded rows
	poller := newRestatePoller(admin.URL, p.View, p.Pub, clock)
	journals := func() int {
		n := 0
		for _, q := range admin.Queries() {
			if strings.Contains(q, "FROM sys_journal_events") {
				n++
			}
		}
		return n
	}
	failing := func(retries int, modifiedAt string) func(map[string]any) {
		return func(row map[string]any) {
			row["retry_count"], row["modified_at"] = retries, modifiedAt
			row["last_failure"] = fmt.Sprintf("[500 Internal] downstream unavailable (attempt %d)\nError: downstream unavailable (attempt %d)\n    at service.js:44:15", retries, retries)
		}
	}
	const modified = "2026-11-23T22:55:15.034Z"
	// A webhook tells the view of the invocation; the poller has not seen it.
	p.Publish(t, substate.RawEvent{Kind: substate.RawRestate, ID: "msg_webhook_1", Body: admin.setRowWith(t, "restate-invocation-backing-off.json", failing(1, modified))})
	p.WaitTenant(t, restateTenant, "backing-off", func(v substate.TenantView) bool { return v.WorkflowRetryCount == 1 })
	sweep := func(retries int, modifiedAt string) substate.TenantView {
		t.Helper()
		admin.setRowWith(t, "restate-invocation-backing-off.json", failing(retries, modifiedAt))
		clock.Advance(poller.Interval)
		if res, err := poller.Sweep(ctx); err != nil || res.Published != 1 {
			t.Fatalf("sweep at retry_count %d = %+v, %v; want the row published", retries, res, err)
		}
		return p.WaitTenant(t, restateTenant, fmt.Sprintf("retry_count %d", retries), func(v substate.TenantView) bool { return v.WorkflowRetryCount == retries })
	}
	sweep(1, modified) // first seen with a retry_count: its journal is read
	if n := journals(); n != 1 {
		t.Fatalf("the journal of a row first seen was read %d times, want once", n)
	}
	v := sweep(4, modified) // three attempts between two polls, one spell
	if v.WorkflowSubState != substate.StateBackingOff || v.WorkflowErrorMessage != "downstream unavailable (attempt 4)" {
		t.Fatalf("view after the jump = %s, %q; want backing-off with the row's last_failure", v.WorkflowSubState, v.WorkflowErrorMessage)
	}
	if n := journals(); n != 1 {
		t.Fatalf("the journal was read %d times, want no read for a jump under the same modified_at", n)
	}
	sweep(6, "2026-11-23T22:56:00.000Z") // a new modified_at: paused and resumed, perhaps
	if n := journals(); n != 2 {
		t.Fatalf("the journal was read %d times, want once more for a new modified_at", n)
	}
}
