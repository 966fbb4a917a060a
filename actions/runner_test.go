package actions_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/actions"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestJobRetriesFailedExecutions: a job retries every failed execution
// the filter selects, exactly those the dry run counted; each outcome is
// an audit event under the job and the report equals SUBSTATE_AUDIT.
func TestJobRetriesFailedExecutions(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	f.failTenants(t, "acme-", 30)
	f.failTenants(t, "beta-", 5)
	ctx := context.Background()
	req := request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-", SubState: substate.StateFailed})
	p, err := f.svc.Preview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 30 || p.WouldAct != 30 || len(p.Lanes) != 1 || p.Lanes[0].Lane != "engine" || len(p.Sample) != 20 {
		t.Fatalf("preview %+v", p)
	}
	f.fixed.Store(true)
	want := p.Total
	req.ExpectedCount = &want
	j, err := f.svc.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if j.Total != 30 || j.State != substate.JobQueued || j.Position != p.Position {
		t.Fatalf("job %+v (preview at %d)", j, p.Position)
	}
	j = f.waitJob(t, j.ID, time.Minute)
	if j.State != substate.JobDone || j.Progress.Done != 30 || j.Progress.Remaining != 0 {
		t.Fatalf("job %+v", j)
	}
	got, audit := f.reportOutcomes(t, j.ID), f.auditOutcomes(t, j.ID)
	if len(audit) != 30 || !maps.Equal(got, audit) {
		t.Errorf("report %v\naudit %v", got, audit)
	}
	sel, err := f.p.View.Select(ctx, substate.TenantFilter{TenantPrefix: "beta-", SubState: substate.StateFailed}, 100)
	if err != nil || len(sel.Tenants) != 5 {
		t.Errorf("tenants outside the filter: %d failed, %v", len(sel.Tenants), err)
	}
}

// slowEngine limits the engine lane to one member at a time, rate a second.
func slowEngine(f *fleet, rate float64) {
	f.limits["engine"] = actions.Limits{Concurrency: 1, APIs: map[string]actions.Bucket{"engine": {Size: 1, Rate: rate}}}
}

// outcomes counts a job's members with an outcome.
func (f *fleet) outcomes(t *testing.T, id string) int {
	t.Helper()
	j, err := f.svc.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.Progress.Outcomes()
}

// waitOutcomes waits until a job has at least n outcomes.
func (f *fleet) waitOutcomes(t *testing.T, id string, n int) {
	t.Helper()
	pipelinetest.WaitFor(t, fmt.Sprintf("%d outcomes", n), func() bool { return f.outcomes(t, id) >= n })
}

// TestJobResumesOnAnotherRunner: a job whose runner stops mid-way is
// taken up by the next runner, and no execution is retried twice (each
// task ran once before the job, once for its retry).
func TestJobResumesOnAnotherRunner(t *testing.T) {
	f := newFleet(t)
	slowEngine(f, 12)
	f.start(t)
	f.failTenants(t, "acme-", 30)
	f.fixed.Store(true)
	j, err := f.svc.Create(context.Background(), request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
	if err != nil {
		t.Fatal(err)
	}
	f.waitOutcomes(t, j.ID, 5)
	f.runner.Close()
	if n := f.outcomes(t, j.ID); n == 30 {
		t.Fatal("the job ended before its runner stopped: nothing to resume")
	}
	slowEngine(f, 200)
	f.start(t)
	j = f.waitJob(t, j.ID, time.Minute)
	if j.State != substate.JobDone || j.Progress.Done != 30 {
		t.Fatalf("job %+v", j)
	}
	if got := f.redrives(t, "acme-", 30); slices.Max(got) != 1 || slices.Min(got) != 1 {
		t.Errorf("the executions were retried %v times, want once each", got)
	}
	if got, audit := f.reportOutcomes(t, j.ID), f.auditOutcomes(t, j.ID); !maps.Equal(got, audit) {
		t.Errorf("report %v\naudit %v", got, audit)
	}
}

// TestCancelMidway: a cancelled job acts on no member more; its report
// says what was done and the rest stays not acted on.
func TestCancelMidway(t *testing.T) {
	f := newFleet(t)
	slowEngine(f, 8)
	f.start(t)
	f.failTenants(t, "acme-", 30)
	ctx := context.Background()
	j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
	if err != nil {
		t.Fatal(err)
	}
	f.waitOutcomes(t, j.ID, 3)
	if _, err := f.svc.Control(ctx, j.ID, substate.JobCancel, "ops"); err != nil {
		t.Fatal(err)
	}
	j = f.waitJob(t, j.ID, 30*time.Second)
	retried := sum(f.redrives(t, "acme-", 30))
	time.Sleep(time.Second)
	done := j.Progress.Outcomes()
	if j.State != substate.JobCancelled || done >= 30 || j.Progress.Remaining != 30-done || f.outcomes(t, j.ID) != done ||
		retried != done || sum(f.redrives(t, "acme-", 30)) != retried {
		t.Fatalf("cancelled job %+v (%d executions retried, then %d)", j, retried, sum(f.redrives(t, "acme-", 30)))
	}
	if len(f.auditOutcomes(t, j.ID)) != done {
		t.Errorf("audit holds %d outcomes, the report %d", len(f.auditOutcomes(t, j.ID)), done)
	}
	if _, err := f.svc.Control(ctx, j.ID, substate.JobResume, "ops"); substate.ErrorCode(err) != substate.ECONFLICT {
		t.Errorf("resume of a cancelled job: %v", err)
	}
}

// TestPauseAndResume: a paused job acts on no member until resumed.
func TestPauseAndResume(t *testing.T) {
	f := newFleet(t)
	slowEngine(f, 10)
	f.start(t)
	f.failTenants(t, "acme-", 20)
	ctx := context.Background()
	j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
	if err != nil {
		t.Fatal(err)
	}
	f.waitOutcomes(t, j.ID, 2)
	if j, err = f.svc.Control(ctx, j.ID, substate.JobPause, "ops"); err != nil || j.State != substate.JobPaused {
		t.Fatalf("pause: %+v %v", j, err)
	}
	time.Sleep(500 * time.Millisecond) // the runner sees the pause; a member under way ends
	held := f.outcomes(t, j.ID)
	time.Sleep(time.Second)
	if n := f.outcomes(t, j.ID); n != held || n == 20 {
		t.Fatalf("paused job went on: %d then %d outcomes", held, n)
	}
	if _, err := f.svc.Control(ctx, j.ID, substate.JobResume, "ops"); err != nil {
		t.Fatal(err)
	}
	if j = f.waitJob(t, j.ID, time.Minute); j.State != substate.JobDone || j.Progress.Outcomes() != 20 {
		t.Fatalf("resumed job %+v", j)
	}
}

// TestChangedMembersAreSkipped: a member whose execution or sub-state
// changed after the set was frozen is skipped, reason changed, and
// nothing is asked of its provider.
func TestChangedMembersAreSkipped(t *testing.T) {
	f := newFleet(t)
	f.failTenants(t, "acme-", 3)
	f.start(t)
	f.runner.Close() // frozen now, run later
	ctx := context.Background()
	j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
	if err != nil {
		t.Fatal(err)
	}
	f.fixed.Store(true)
	if err := f.eng.RetryExecution(ctx, "x-acme-0001"); err != nil {
		t.Fatal(err)
	}
	f.p.WaitTenant(t, "acme-0001", "succeeded", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	f.start(t)
	j = f.waitJob(t, j.ID, time.Minute)
	rep, err := f.svc.Report(ctx, j.ID, substate.JobReportQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Progress.Done != 2 || j.Progress.Skipped != 1 || rep.Members[1].Outcome != substate.AuditSkipped ||
		!strings.HasPrefix(rep.Members[1].Detail, "changed:") {
		t.Fatalf("job %+v\nreport %+v", j.Progress, rep.Members)
	}
	if got := f.redrives(t, "acme-", 3); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("the executions were retried %v times, want once each (the skipped member's by hand, not by the job)", got)
	}
}

// TestOverlappingJobsActOnceEach: two jobs on the same set never act on
// one execution twice: each execution is retried once, by one of them.
func TestOverlappingJobsActOnceEach(t *testing.T) {
	f := newFleet(t)
	f.failTenants(t, "acme-", 10)
	f.start(t)
	f.runner.Close()
	ctx := context.Background()
	var ids []string
	for range 2 {
		j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	f.fixed.Store(true)
	f.start(t)
	done := 0
	for _, id := range ids {
		j := f.waitJob(t, id, time.Minute)
		done += j.Progress.Done
		if j.Progress.Done+j.Progress.Skipped+j.Progress.Refused != 10 {
			t.Errorf("job %s: %+v", id, j.Progress)
		}
	}
	if got := f.redrives(t, "acme-", 10); slices.Max(got) != 1 || slices.Min(got) != 1 || done != 10 {
		t.Errorf("the executions were retried %v times, %d members done; want once each, and 10", got, done)
	}
}

// TestNoAnswerIsUnknown: a member whose provider never answers is tried
// MaxTries times, then recorded unknown with why; the job ends.
func TestNoAnswerIsUnknown(t *testing.T) {
	f := newFleet(t)
	f.failTenants(t, "acme-", 3)
	f.ops[substate.ProviderEngine] = &engine.RemoteOperator{Conn: f.p.Bus.Conn} // no engine answers
	f.retry = timex.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	f.start(t)
	j, err := f.svc.Create(context.Background(), request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"}))
	if err != nil {
		t.Fatal(err)
	}
	j = f.waitJob(t, j.ID, time.Minute)
	rep, err := f.svc.Report(context.Background(), j.ID, substate.JobReportQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != substate.JobDone || j.Progress.Unknown != 3 || !strings.Contains(rep.Members[0].Error, "no answer after 5 tries") {
		t.Fatalf("job %+v, report %+v", j.Progress, rep.Members)
	}
}

// TestEndedJobsAreNotFoldedAgain: once a job has ended, listing it again
// reads nothing of SUBSTATE_AUDIT (its members' outcomes no longer
// change) and answers the same job: the JetStream API calls of a list
// are those of reading the job records alone.
func TestEndedJobsAreNotFoldedAgain(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	f.failTenants(t, "acme-", 5)
	f.fixed.Store(true)
	ctx := context.Background()
	j, err := f.svc.Create(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-", SubState: substate.StateFailed}))
	if err != nil {
		t.Fatal(err)
	}
	f.waitJob(t, j.ID, time.Minute)
	apiCalls := func(fn func()) uint64 {
		t.Helper()
		before, err := f.p.Bus.JetStream.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fn()
		after, err := f.p.Bus.JetStream.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return after.API.Total - before.API.Total - 1 // the first AccountInfo
	}
	// A fresh service has not seen the job end: its first list folds.
	svc := &actions.Service{JS: f.p.Bus.JetStream, Views: f.p.View, Rules: f.rules, Limits: f.limits}
	var first, second []substate.Job
	list := func(into *[]substate.Job) func() {
		return func() {
			if *into, err = svc.Jobs(ctx, 10); err != nil || len(*into) != 1 {
				t.Fatalf("jobs %+v %v", *into, err)
			}
		}
	}
	folded, cached := apiCalls(list(&first)), apiCalls(list(&second))
	t.Logf("JetStream API calls: %d for the first list, %d for the second", folded, cached)
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("second list %+v, want %+v", second, first)
	}
	if cached >= folded {
		t.Errorf("the second list of an ended job made %d JetStream API calls, the first %d: want fewer (no audit fold)", cached, folded)
	}
}
