package restate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
	"github.com/substatehq/substate/testkit/restatetest"
)

// burstCase is one kind of invocation that fails fast, and what its view
// must show once Restate is done with it, whatever the poller saw of it on
// the way.
type burstCase struct {
	handler  string
	resume   bool // resumed once, as soon as it first pauses
	final    func(row map[string]any) bool
	subState substate.SubState
	retries  int
	attempt  int // the attempt whose failure is the view's message
}

var burstCases = []burstCase{
	// Killed by its retry policy after 4 attempts: 3 were retried.
	{"burstKill", false, completed, substate.StateFailed, 3, 4},
	// Paused by its retry policy after 4 attempts: all 4 wait for a resume.
	{"burstPause", false, paused, substate.StateError, 4, 4},
	// Paused after 4, resumed at once, paused again after 4 more.
	{"relapse", true, paused, substate.StateError, 8, 8},
}

func completed(row map[string]any) bool { return row["status"] == "completed" }
func paused(row map[string]any) bool    { return row["status"] == "paused" }

// TestRestateRealServerDefaultInterval runs the poller at its default
// interval (15 s) over invocations that fail 4 times within a few seconds
// and are then killed or paused by their retry policy, or paused, resumed
// and paused again, all between two polls: 10 of each, started a fraction
// of a second apart so the polls catch them at every stage. Every view must
// show the exact count and the last real message: the count comes from the
// journal, not from what a poll happened to see.
func TestRestateRealServerDefaultInterval(t *testing.T) {
	r := newRealRestate(t)
	rs := r.rs
	r.poller.QPS = 0 // the sweeps' pace is not under test: their interval is
	// Read before Run: each sweep fills the poller's unset settings, so
	// reading them while it runs is a data race.
	interval := r.poller.Interval
	if interval != 15*time.Second {
		t.Fatalf("the default interval is %s; this test is about 15 s", interval)
	}
	pipelinetest.RunInBackground(t, r.poller.Run)
	type run struct {
		c       burstCase
		id, key string
		resumed bool
	}
	var runs []*run
	for i := range 10 {
		for _, c := range burstCases {
			key := fmt.Sprintf("%s-%d", c.handler, i)
			runs = append(runs, &run{c: c, key: key, id: rs.Send(t, "Provision", key, c.handler, nil, 0)})
		}
		time.Sleep(300 * time.Millisecond)
	}
	deadline := time.Now().Add(90 * time.Second)
	for pending := len(runs); pending > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d invocations did not reach their final state within 90 s", pending)
		}
		pending = 0
		for _, x := range runs {
			row := rs.Row(t, x.id)
			switch {
			case x.c.resume && !x.resumed && paused(row):
				rs.Resume(t, x.id)
				x.resumed = true
				pending++
			case (x.c.resume && !x.resumed) || !x.c.final(row):
				pending++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, x := range runs {
		if got := rs.Attempts(t, x.id); got != x.c.attempt {
			t.Fatalf("%s made %d attempts, want %d: the test service or its policy changed", x.key, got, x.c.attempt)
		}
	}
	// The next sweep, at most an interval away, shows them all.
	wait := time.Now().Add(2*interval + 10*time.Second)
	for _, x := range runs {
		want := fmt.Sprintf("downstream unavailable (attempt %d)", x.c.attempt)
		var v substate.TenantView
		for {
			v, _ = r.View.Tenant(t.Context(), x.key)
			if v.WorkflowSubState == x.c.subState && v.WorkflowRetryCount == x.c.retries && v.WorkflowErrorMessage == want {
				break
			}
			if time.Now().After(wait) {
				t.Fatalf("%s: view %s, %d retries, error %q; want %s, %d, %q", x.key, v.WorkflowSubState, v.WorkflowRetryCount, v.WorkflowErrorMessage, x.c.subState, x.c.retries, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestRestateRealServerResumedBetweenSweeps pauses and resumes an
// invocation between two sweeps: the sweep after sees it backing off with
// Restate's retry_count started again at 1, and must count the 4 attempts
// of the pause it never saw; the pause shows in the tenant's history at
// the time Restate recorded it, from the journal.
func TestRestateRealServerResumedBetweenSweeps(t *testing.T) {
	r := newRealRestate(t)
	rs := r.rs
	id := rs.Send(t, "Provision", "t-relapse", "relapse", nil, 0)
	rs.WaitRow(t, id, "paused", paused)
	pausedAt := pauseTimes(t, rs, id)
	rs.Resume(t, id)
	// Backing off after the third attempt since the resume: the longest
	// wait of the policy (4 s), so the sweep and describe below see the
	// same row even on a loaded machine.
	row := rs.WaitRow(t, id, "backing off after its third attempt since the resume", func(row map[string]any) bool {
		return row["status"] == "backing-off" && row["retry_count"] == 3.0
	})
	r.sweep(t)
	want := expectOf(rowStateOf(row), 0, 4)
	if s := rowStateOf(rs.Row(t, id)); s != rowStateOf(row) {
		t.Fatalf("the row changed during the sweep: %s, then %s", rowStateOf(row), s)
	}
	want.check(t, "resumed between sweeps, row "+rowStateOf(row).String(), r.Tenant(t, "t-relapse"))
	if want.retries != 7 {
		t.Fatalf("want 7 retries, the test expects %d", want.retries)
	}
	// describe agrees with the view, backing off and then paused again.
	describeAgrees(t, r, id, "t-relapse")
	rs.WaitRow(t, id, "paused again", paused)
	r.sweep(t)
	describeAgrees(t, r, id, "t-relapse")
	if len(pausedAt) != 1 {
		t.Fatalf("journal pauses %v, want one", pausedAt)
	}
	ev, ok := eventAt(t, r.Pipeline, "t-relapse", pausedAt[0])
	if !ok || ev.SubState != substate.StateError || ev.RetryCount != 4 || ev.ErrorMessage != "downstream unavailable (attempt 4)" {
		t.Fatalf("history at the pause %s: %+v (found %v); want error, 4 retries, attempt 4's message", pausedAt[0], ev, ok)
	}
}

// pauseTimes returns the times of the Paused events in an invocation's
// journal.
func pauseTimes(t *testing.T, rs *restatetest.Server, id string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, row := range rs.Query(t, "SELECT appended_at FROM sys_journal_events WHERE id = '"+id+"' AND event_type = 'Paused' ORDER BY appended_at") {
		var r struct {
			At time.Time `json:"appended_at"`
		}
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.At)
	}
	return out
}

// eventAt returns the tenant's canonical event that happened at t.
func eventAt(t *testing.T, p *pipelinetest.Pipeline, tenant string, at time.Time) (substate.EventData, bool) {
	t.Helper()
	for _, m := range bustest.Msgs(t, p.Bus.JetStream, substate.StreamEvents) {
		if !strings.HasSuffix(m.Subject, "."+tenant) {
			continue
		}
		var ce struct {
			Data substate.EventData `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &ce); err != nil {
			t.Fatal(err)
		}
		if ce.Data.OccurredAt.Equal(at) {
			return ce.Data, true
		}
	}
	return substate.EventData{}, false
}

// describeAgrees checks that the operator describes an invocation as the
// tenant's view shows it: the retry count as attempts, the same error.
func describeAgrees(t *testing.T, r *realRestate, id, tenant string) {
	t.Helper()
	info, err := (&restate.Operator{Admin: r.poller.Admin}).DescribeExecution(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Tenant(t, tenant); info.Attempts != v.WorkflowRetryCount || info.Error != v.WorkflowErrorMessage || v.WorkflowErrorMessage == "" {
		t.Fatalf("describe %s: attempts %d, error %q; the view: %d retries, error %q", info.ProviderState, info.Attempts, info.Error, v.WorkflowRetryCount, v.WorkflowErrorMessage)
	}
}
