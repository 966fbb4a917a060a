package restate_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestRestateRealServerPoller runs the invocation stories of the test
// service on a real Restate server and follows each with the admin-API
// poller alone (discovery by service, no webhook): after every sweep the
// tenant's view must match what sys_invocation said at that moment.
func TestRestateRealServerPoller(t *testing.T) {
	r := newRealRestate(t)
	rs := r.rs
	settled := func(s rowState) bool { return s.Status == "completed" }

	t.Run("Succeeds", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-ok", "ok", nil, 0)
		r.follow(t, id, "t-ok", settled)
	})
	t.Run("FailsThenSucceeds", func(t *testing.T) {
		rs.Gate(t, "t-flaky", "fail")
		id := rs.Send(t, "Provision", "t-flaky", "flaky", nil, 0)
		seen := r.follow(t, id, "t-flaky", func(s rowState) bool { return s.Status == "backing-off" && s.RetryCount >= 3 })
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "backing-off/") }) {
			t.Fatalf("statuses %v: never saw backing-off", seen)
		}
		rs.Gate(t, "t-flaky", "open")
		r.follow(t, id, "t-flaky", settled)
		if v := r.Tenant(t, "t-flaky"); v.WorkflowSubState != substate.StateSucceeded || v.WorkflowRetryCount != 0 {
			t.Fatalf("after success: %+v", v)
		}
	})
	t.Run("TerminalError", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-term", "terminal", nil, 0)
		r.follow(t, id, "t-term", settled)
		if v := r.Tenant(t, "t-term"); v.WorkflowSubState != substate.StateFailed || v.WorkflowErrorMessage != "card declined: insufficient_funds" {
			t.Fatalf("view %+v", v)
		}
	})
	t.Run("SleepSuspends", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-nap", "nap", nil, 0)
		r.follow(t, id, "t-nap", func(s rowState) bool { return s.Status == "suspended" })
	})
	t.Run("PausedThenResumed", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-stuck", "stuck", nil, 0)
		r.follow(t, id, "t-stuck", func(s rowState) bool { return s.Status == "paused" })
		v := r.Tenant(t, "t-stuck")
		if v.WorkflowSubState != substate.StateError || v.WorkflowRetryCount != 3 || v.WorkflowErrorMessage != "downstream unavailable (attempt 3)" {
			t.Fatalf("paused after 3 attempts: view %+v", v)
		}
		// Resumed, it fails 3 times more: Restate counts from 1 again, the view counts on.
		r.resume(t, id)
		r.follow(t, id, "t-stuck", func(s rowState) bool { return s.Status == "paused" })
		if v := r.Tenant(t, "t-stuck"); v.WorkflowRetryCount != 6 || v.WorkflowErrorMessage != "downstream unavailable (attempt 6)" {
			t.Fatalf("paused again: view %+v", v)
		}
		rs.Gate(t, "t-stuck", "open")
		r.resume(t, id)
		r.follow(t, id, "t-stuck", settled)
	})
	t.Run("PausedWithTheSameErrorEachTime", func(t *testing.T) {
		// Restate records one TransientError for attempts that fail alike:
		// the count comes from the handler's retry policy (3 attempts).
		id := rs.Send(t, "Provision", "t-same", "same", nil, 0)
		r.follow(t, id, "t-same", func(s rowState) bool { return s.Status == "paused" })
		if v := r.Tenant(t, "t-same"); v.WorkflowRetryCount != 3 || v.WorkflowErrorMessage != "downstream unavailable" {
			t.Fatalf("paused after 3 attempts: view %+v", v)
		}
		r.resume(t, id)
		r.follow(t, id, "t-same", func(s rowState) bool { return s.Status == "paused" })
		if v := r.Tenant(t, "t-same"); v.WorkflowRetryCount != 6 {
			t.Fatalf("paused again after 6 attempts: view %+v", v)
		}
		rs.Gate(t, "t-same", "open")
		r.resume(t, id)
		r.follow(t, id, "t-same", settled)
	})
	t.Run("FailsNTimesThenSucceeds", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-four", "flaky", map[string]int{"failures": 4}, 0)
		seen := r.follow(t, id, "t-four", settled)
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "backing-off/") }) {
			t.Fatalf("statuses %v: never saw backing-off", seen)
		}
		if v := r.Tenant(t, "t-four"); v.WorkflowSubState != substate.StateSucceeded || rs.Attempts(t, id) != 5 {
			t.Fatalf("after 4 failures and a success: view %+v, %d attempts", v, rs.Attempts(t, id))
		}
	})
	t.Run("Killed", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-kill", "nap", nil, 0)
		r.follow(t, id, "t-kill", func(s rowState) bool { return s.Status == "suspended" })
		rs.Kill(t, id)
		r.follow(t, id, "t-kill", settled)
		if v := r.Tenant(t, "t-kill"); v.WorkflowVerb != substate.VerbCancelled {
			t.Fatalf("killed: view %+v", v)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-cancel", "nap", nil, 0)
		r.follow(t, id, "t-cancel", func(s rowState) bool { return s.Status == "suspended" })
		rs.Cancel(t, id)
		r.follow(t, id, "t-cancel", settled)
		if v := r.Tenant(t, "t-cancel"); v.WorkflowSubState != substate.StateFailed || v.WorkflowVerb != substate.VerbCancelled {
			t.Fatalf("cancelled: view %+v", v)
		}
	})
	t.Run("DelayedSend", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-later", "ok", nil, 2*time.Second)
		r.follow(t, id, "t-later", func(s rowState) bool { return s.Status == "scheduled" })
		r.follow(t, id, "t-later", settled)
	})
	t.Run("KeylessServiceIsDeadLettered", func(t *testing.T) {
		id := rs.Send(t, "Notify", "", "send", nil, 0)
		rs.WaitRow(t, id, "completed", func(row map[string]any) bool { return row["status"] == "completed" })
		r.sweep(t)
		if !dlqHas(t, r.Pipeline, id, "tenant_unresolved") {
			t.Fatalf("no dead letter naming the keyless invocation %s", id)
		}
	})
	t.Run("BogusIDDoesNotHoldUpOthers", func(t *testing.T) {
		rs.Gate(t, "t-other", "fail")
		good := rs.Send(t, "Provision", "t-other", "flaky", nil, 0)
		rs.WaitRow(t, good, "backing-off", func(row map[string]any) bool { return row["status"] == "backing-off" })
		r.applyView(t, "mallory", "inv_1")                              // not an id Restate can parse
		r.applyView(t, "eve", "inv_1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz") // the right shape, out of range
		r.follow(t, good, "t-other", func(s rowState) bool { return s.Status == "backing-off" })
		for _, bad := range []string{"inv_1", "inv_1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
			if !dlqHas(t, r.Pipeline, bad, "not a Restate invocation id") {
				t.Fatalf("no dead letter naming %s", bad)
			}
		}
		rs.Gate(t, "t-other", "open")
		r.follow(t, good, "t-other", settled)
	})
}

// dlqHas reports whether SUBSTATE_DLQ holds a dead letter whose body or
// reason names what, with a reason containing reason.
func dlqHas(t *testing.T, p *pipelinetest.Pipeline, what, reason string) bool {
	t.Helper()
	for _, m := range bustest.Msgs(t, p.Bus.JetStream, substate.StreamDLQ) {
		r := m.Header.Get(substate.HeaderDLQReason)
		if strings.Contains(r, reason) && (strings.Contains(string(m.Data), what) || strings.Contains(r, what)) {
			return true
		}
	}
	return false
}

// TestRestateRealServerPollerQuiet runs a poller that reads by id only the
// invocations quiet for After: one it has just seen paused is not read
// again, but the poller still remembers the pause, so once resumed and
// backing off the count goes on from the spell before (Restate's
// retry_count starts again at 1).
func TestRestateRealServerPollerQuiet(t *testing.T) {
	r := newRealRestate(t)
	rs := r.rs
	r.poller.After = time.Hour
	id := rs.Send(t, "Provision", "t-stall", "stall", nil, 0)
	rs.WaitRow(t, id, "paused", func(row map[string]any) bool { return row["status"] == "paused" })
	r.sweep(t) // discovery publishes the paused row
	if v := r.Tenant(t, "t-stall"); v.WorkflowSubState != substate.StateError || v.WorkflowRetryCount != 3 {
		t.Fatalf("paused after 3 attempts: view %+v", v)
	}
	if res := r.sweep(t); res.Stale != 0 || res.Polled != 0 {
		t.Fatalf("a sweep within After read the invocation: %+v", res)
	}
	r.resume(t, id)
	row := rs.WaitRow(t, id, "backing off after its second attempt since the resume", func(row map[string]any) bool {
		return row["status"] == "backing-off" && row["retry_count"] == 2.0
	})
	r.sweep(t) // discovery: the resume moved modified_at
	want := expectOf(rowStateOf(row), 3, r.resumedAfter[id])
	if want.retries != 5 {
		t.Fatalf("expected %d retries for row %v", want.retries, rowStateOf(row))
	}
	if s := rowStateOf(rs.Row(t, id)); s != rowStateOf(row) {
		t.Fatalf("the row changed during the sweep: %s, then %s", rowStateOf(row), s)
	}
	want.check(t, "t-stall resumed, row "+rowStateOf(row).String(), r.Tenant(t, "t-stall"))
}

// TestRestateRealServerJournalReadOncePerPause: the journal of a paused
// invocation is read once per pause, also when discovery found it before
// the view listed it.
func TestRestateRealServerJournalReadOncePerPause(t *testing.T) {
	r := newRealRestate(t)
	journalReads := &countingTransport{match: "FROM sys_journal_events"}
	r.poller.Admin.HTTP = &http.Client{Transport: journalReads, Timeout: 10 * time.Second}
	id := r.rs.Send(t, "Provision", "t-once", "stuck", nil, 0)
	r.rs.WaitRow(t, id, "paused", func(row map[string]any) bool { return row["status"] == "paused" })
	r.sweep(t) // discovery publishes the paused row, with its journal
	if v := r.Tenant(t, "t-once"); v.WorkflowSubState != substate.StateError || v.WorkflowRetryCount != 3 {
		t.Fatalf("paused after 3 attempts: view %+v", v)
	}
	r.sweep(t)
	r.sweep(t)
	if n := journalReads.count.Load(); n != 1 {
		t.Fatalf("the journal of an invocation paused once was read %d times, want 1", n)
	}
}

// countingTransport counts the requests to a path starting with path, or
// whose body contains match.
type countingTransport struct {
	path, match string
	count       atomic.Int32
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.path != "" && strings.HasPrefix(req.URL.Path, c.path) {
		c.count.Add(1)
	}
	if c.match != "" && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if strings.Contains(string(b), c.match) {
			c.count.Add(1)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestRestateRealServerPolicyReadWithTheJournal: the poller reads a paused
// invocation's retry policy with its journal, once per pause, and not again
// while the invocation stays paused, however long.
func TestRestateRealServerPolicyReadWithTheJournal(t *testing.T) {
	r := newRealRestate(t)
	var later time.Duration
	r.poller.Now = func() time.Time { return time.Now().Add(later) }
	policyReads := &countingTransport{path: "/services/"}
	r.poller.Admin.HTTP = &http.Client{Transport: policyReads, Timeout: 10 * time.Second}
	id := r.rs.Send(t, "Provision", "t-policy", "same", nil, 0)
	r.rs.WaitRow(t, id, "paused", func(row map[string]any) bool { return row["status"] == "paused" })
	r.sweep(t)
	if v := r.Tenant(t, "t-policy"); v.WorkflowSubState != substate.StateError || v.WorkflowRetryCount != 3 {
		t.Fatalf("paused after 3 attempts alike: view %+v, want 3 retries", v)
	}
	for range 3 {
		later += 2 * time.Minute
		r.sweep(t)
	}
	if v, n := r.Tenant(t, "t-policy"), policyReads.count.Load(); v.WorkflowRetryCount != 3 || n != 1 {
		t.Fatalf("still paused 6 minutes later: view %+v after %d policy reads, want 3 retries and 1 read", v, n)
	}
}
