package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// jobCalls records what the fake job service was asked.
type jobCalls struct {
	mu       sync.Mutex
	requests []substate.JobRequest
	controls []string
	polls    int
}

// jobService is a substate.JobService of function fields.
type jobService struct {
	preview func(context.Context, substate.JobRequest) (substate.JobPreview, error)
	create  func(context.Context, substate.JobRequest) (substate.Job, error)
	job     func(context.Context, string) (substate.Job, error)
	jobs    func(context.Context, int) ([]substate.Job, error)
	control func(context.Context, string, substate.JobOp, string) (substate.Job, error)
	report  func(context.Context, string, substate.JobReportQuery) (substate.JobReport, error)
}

func (s jobService) Preview(ctx context.Context, r substate.JobRequest) (substate.JobPreview, error) {
	return s.preview(ctx, r)
}
func (s jobService) Create(ctx context.Context, r substate.JobRequest) (substate.Job, error) {
	return s.create(ctx, r)
}
func (s jobService) Job(ctx context.Context, id string) (substate.Job, error) { return s.job(ctx, id) }
func (s jobService) Jobs(ctx context.Context, n int) ([]substate.Job, error)  { return s.jobs(ctx, n) }
func (s jobService) Control(ctx context.Context, id string, op substate.JobOp, who string) (substate.Job, error) {
	return s.control(ctx, id, op, who)
}
func (s jobService) Report(ctx context.Context, id string, q substate.JobReportQuery) (substate.JobReport, error) {
	return s.report(ctx, id, q)
}

// fakeJobs records requests and answers jobs: job "acme-1" is unscoped,
// "scoped" was created by a key limited to "acme-"; a job's progress moves
// on with every read until it is done after the third.
func fakeJobs(c *jobCalls) jobService {
	job := func(_ context.Context, id string) (substate.Job, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		j := aJob(id)
		j.Total, j.State = 3, substate.JobRunning
		if id == "scoped" {
			j.Scope = "acme-"
		}
		c.polls++
		j.Progress.Done = min(c.polls, 3)
		if j.Progress.Done == 3 {
			j.State = substate.JobDone
		}
		return j, nil
	}
	record := func(r substate.JobRequest) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.requests = append(c.requests, r)
	}
	return jobService{
		preview: func(_ context.Context, r substate.JobRequest) (substate.JobPreview, error) {
			record(r)
			return substate.JobPreview{Action: r.Action, Filter: r.Filter, Total: 2, Lanes: []substate.LanePreview{},
				Sample: []substate.JobMember{}, Reasons: []substate.JobReason{}}, nil
		},
		create: func(_ context.Context, r substate.JobRequest) (substate.Job, error) {
			record(r)
			j := aJob("job-1")
			j.Action, j.Scope = r.Action, r.Scope
			return j, nil
		},
		job: job,
		jobs: func(context.Context, int) ([]substate.Job, error) {
			scoped := aJob("scoped")
			scoped.Scope = "acme-"
			return []substate.Job{aJob("acme-1"), scoped}, nil
		},
		control: func(ctx context.Context, id string, op substate.JobOp, who string) (substate.Job, error) {
			c.mu.Lock()
			c.controls = append(c.controls, string(op)+" by "+who)
			c.mu.Unlock()
			return aJob(id), nil
		},
		report: func(_ context.Context, id string, q substate.JobReportQuery) (substate.JobReport, error) {
			return substate.JobReport{Job: aJob(id), Members: []substate.MemberOutcome{}}, nil
		},
	}
}

// aJob is a queued retry job.
func aJob(id string) substate.Job {
	return substate.Job{ID: id, Action: substate.ActionRetry, Filter: map[string]string{}, Who: "ops", State: substate.JobQueued, Lanes: map[string]int{}}
}

// jobsServer serves the job routes with keys "ops" (admin), "acme"
// (admin, prefix acme-) and "reader" (read).
func jobsServer(t *testing.T, c *jobCalls) *httptest.Server {
	t.Helper()
	keys := &httpapi.Keys{Text: keyLine("ops", "admin", "*", "k-ops") + ";" + keyLine("acme", "admin", "acme-", "k-acme") + ";" +
		keyLine("reader", "read", "*", "k-read")}
	if err := keys.Load(); err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{Auth: &httpapi.Authorizer{Keys: keys}, Jobs: fakeJobs(c)}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func postJob(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/actions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// TestCreateJobInput: bad input is a 4xx naming what is wrong, and no job
// is asked of the service.
func TestCreateJobInput(t *testing.T) {
	cases := []struct {
		name, key, body string
		status          int
		says            string
	}{
		{"UnknownField", "k-ops", `{"action":"retry","filter":{"substate":"failed"}}`, 400, `unknown filter field \"substate\"`},
		{"BadValue", "k-ops", `{"action":"retry","filter":{"subState":"broken"}}`, 400, "unknown sub-state"},
		{"BadDuration", "k-ops", `{"action":"retry","filter":{"inStateLongerThan":"soon"}}`, 400, "inStateLongerThan"},
		{"UnknownAction", "k-ops", `{"action":"delete","filter":{}}`, 400, "unknown action"},
		{"UnknownBodyField", "k-ops", `{"action":"retry","filtre":{}}`, 400, `unknown field \"filtre\"`},
		{"EmptyValue", "k-ops", `{"action":"retry","filter":{"subState":"failed","fingerprint":""}}`, 400, "filter field fingerprint is empty"},
		{"LongStep", "k-ops", `{"action":"retry","filter":{"step":"` + strings.Repeat("s", 257) + `"}}`, 400, "step: longer than"},
		{"DeadLetterFieldOnTenants", "k-ops", `{"action":"retry","filter":{"stage":"project"}}`, 400, "unknown filter field"},
		{"OutsidePrefix", "k-acme", `{"action":"retry","filter":{"tenantPrefix":"beta-"}}`, 403, "outside this key's tenants"},
		{"ReadKey", "k-read", `{"action":"retry","filter":{}}`, 403, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &jobCalls{}
			srv := jobsServer(t, c)
			status, body := postJob(t, srv.URL, tc.key, tc.body)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("got %d %s, want %d saying %q", status, body, tc.status, tc.says)
			}
			if len(c.requests) != 0 {
				t.Errorf("the service was asked %v", c.requests)
			}
		})
	}
}

// TestCreateJobNarrowsToTheKey: a prefix key's filter is narrowed to its
// prefix, never widened, and the job records who and the scope.
func TestCreateJobNarrowsToTheKey(t *testing.T) {
	cases := []struct{ name, filter, want string }{
		{"NoPrefix", `{}`, "acme-"},
		{"Wider", `{"tenantPrefix":"ac"}`, "acme-"},
		{"Narrower", `{"tenantPrefix":"acme-eu-"}`, "acme-eu-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &jobCalls{}
			srv := jobsServer(t, c)
			status, body := postJob(t, srv.URL, "k-acme", `{"action":"stop","reason":"incident 7","filter":`+tc.filter+`}`)
			if status != http.StatusCreated {
				t.Fatalf("got %d %s", status, body)
			}
			got := c.requests[0]
			if got.Tenants.TenantPrefix != tc.want || got.Scope != "acme-" || got.Who != "acme" || got.Reason != "incident 7" {
				t.Errorf("asked %+v, want tenantPrefix %q, scope acme-, who acme", got, tc.want)
			}
		})
	}
	t.Run("DryRunPreviews", func(t *testing.T) {
		c := &jobCalls{}
		srv := jobsServer(t, c)
		status, body := postJob(t, srv.URL, "k-ops", `{"action":"retry","dryRun":true,"filter":{"fingerprint":"engine/x/boom, at <n>"}}`)
		if status != http.StatusOK || !strings.Contains(body, `"total":2`) {
			t.Fatalf("got %d %s", status, body)
		}
		if f := c.requests[0].Tenants.Fingerprint; f != "engine/x/boom, at <n>" {
			t.Errorf("fingerprint %q", f)
		}
	})
	t.Run("StepAndWorkflowType", func(t *testing.T) {
		c := &jobCalls{}
		srv := jobsServer(t, c)
		status, body := postJob(t, srv.URL, "k-ops", `{"action":"restart","dryRun":true,"filter":{"step":"Charge","workflowType":"billing"}}`)
		if status != http.StatusOK {
			t.Fatalf("got %d %s", status, body)
		}
		if f := c.requests[0].Tenants; f.Step != "Charge" || f.WorkflowType != "billing" {
			t.Errorf("asked %+v, want step Charge of workflow type billing", f)
		}
	})
}

// TestJobsStayInTheKeysScope: a prefix key neither lists, reads nor
// controls a job created without its prefix.
func TestJobsStayInTheKeysScope(t *testing.T) {
	c := &jobCalls{}
	srv := jobsServer(t, c)
	get := func(key, path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	if status, body := get("k-acme", "/v1/actions"); status != 200 || strings.Contains(body, `"id":"acme-1"`) || !strings.Contains(body, `"id":"scoped"`) {
		t.Errorf("list: %d %s", status, body)
	}
	if status, _ := get("k-acme", "/v1/actions/acme-1"); status != http.StatusNotFound {
		t.Errorf("read of an unscoped job: %d, want 404", status)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/actions/acme-1/cancel", nil)
	req.Header.Set("Authorization", "Bearer k-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || len(c.controls) != 0 {
		t.Errorf("cancel of an unscoped job: %d, controls %v", resp.StatusCode, c.controls)
	}
}

// TestJobEvents: the stream sends the job as it moves and ends with it
// done.
func TestJobEvents(t *testing.T) {
	c := &jobCalls{}
	srv := jobsServer(t, c)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/actions/acme-1/events", nil)
	req.Header.Set("Authorization", "Bearer k-ops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	var last substate.Job
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if err := json.Unmarshal([]byte(data), &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := strings.Join(events, ","); got != "progress,progress,end" || last.State != substate.JobDone || last.Progress.Done != 3 {
		t.Errorf("events %s, last %+v", got, last)
	}
}

// TestJobEventsEndOnClose: closing the server ends an action's progress
// stream that would otherwise go on, as it ends every stream it serves:
// Close does not wait for it until its own timeout, and fails then.
func TestJobEventsEndOnClose(t *testing.T) {
	running := func(context.Context, string) (substate.Job, error) {
		j := aJob("acme-1")
		j.Total, j.State = 3, substate.JobRunning
		return j, nil
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Jobs: jobService{job: running}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL() + "/v1/actions/acme-1/events")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("progress stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); line != "event: progress\n" {
		t.Fatalf("first line %q (%v), want the progress event", line, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close with a progress stream open: %v", err)
	}
}

// TestCreateJobSlowBody: a job's body that does not arrive within the
// read timeout is answered 408 timeout and the connection closed, as
// every body-reading route answers it, not 400 as if it were malformed.
func TestCreateJobSlowBody(t *testing.T) {
	c := &jobCalls{}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Limits: httpapi.Limits{ReadTimeout: 300 * time.Millisecond}, Jobs: fakeJobs(c)}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn := dialServer(t, s)
	_, _ = io.WriteString(conn, "POST /v1/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"action\":")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Error struct{ Code string } }
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || err != nil || e.Error.Code != substate.ETIMEOUT {
		t.Fatalf("a body that never arrives: %d %+v %v, want 408 %s", resp.StatusCode, e, err, substate.ETIMEOUT)
	}
	if !resp.Close || len(c.requests) != 0 {
		t.Errorf("connection closed %v, service asked %v: want it closed and nothing asked", resp.Close, c.requests)
	}
}

// TestJobsOfTheLoopbackOperator: on a loopback address without keys, a
// job and its controls are recorded as taken by LoopbackOperator, as a
// single execution's action is.
func TestJobsOfTheLoopbackOperator(t *testing.T) {
	c := &jobCalls{}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Jobs: fakeJobs(c)}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, path := range []string{"/v1/actions", "/v1/actions/acme-1/cancel"} {
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(`{"action":"retry","filter":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	if len(c.requests) != 1 || c.requests[0].Who != httpapi.LoopbackOperator || len(c.controls) != 1 || c.controls[0] != "cancel by "+httpapi.LoopbackOperator {
		t.Errorf("jobs asked %+v, controls %v: want both by %s", c.requests, c.controls, httpapi.LoopbackOperator)
	}
}

// TestWatchJob: the client follows the job's stream to its end, and says
// the worker is away when the stream ends before the job does.
func TestWatchJob(t *testing.T) {
	c := &jobCalls{}
	srv := jobsServer(t, c)
	var seen []substate.Job
	err := (&httpapi.Client{URL: srv.URL, APIKey: "k-ops"}).WatchJob(context.Background(), "acme-1", func(j substate.Job) { seen = append(seen, j) })
	if err != nil || len(seen) != 3 || seen[2].State != substate.JobDone || seen[2].Progress.Done != 3 {
		t.Fatalf("watched %+v, %v; want three events, the last done", seen, err)
	}
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: progress\ndata: {\"id\":\"acme-1\",\n")
	}))
	defer cut.Close()
	seen = nil
	err = (&httpapi.Client{URL: cut.URL}).WatchJob(context.Background(), "acme-1", func(j substate.Job) { seen = append(seen, j) })
	if substate.ErrorCode(err) != substate.EUNAVAILABLE || len(seen) != 0 {
		t.Fatalf("a stream cut mid-event: %v, %+v; want unavailable and no job", err, seen)
	}
}

// TestJobEventsError: a job the worker can no longer read ends its
// progress stream with an error event whose data is the JSON error body,
// and the client returns that error with its code.
func TestJobEventsError(t *testing.T) {
	var reads atomic.Int32
	job := func(context.Context, string) (substate.Job, error) {
		if reads.Add(1) > 1 {
			return substate.Job{}, substate.Errorf(substate.ENOTFOUND, "job acme-1 is no longer stored")
		}
		j := aJob("acme-1")
		j.Total, j.State = 3, substate.JobRunning
		return j, nil
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Jobs: jobService{job: job}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var seen int
	err := (&httpapi.Client{URL: s.URL()}).WatchJob(context.Background(), "acme-1", func(substate.Job) { seen++ })
	if substate.ErrorCode(err) != substate.ENOTFOUND || !strings.Contains(substate.ErrorMessage(err), "no longer stored") || seen != 1 {
		t.Fatalf("watch: %v (code %s) after %d events; want the worker's not-found error after 1", err, substate.ErrorCode(err), seen)
	}
}
