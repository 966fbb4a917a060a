package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestRequeueJob requeues dead letters as a fleet job (POST /v1/actions,
// action requeue) after a tenant rule was fixed, as in
// TestRequeueStaysInsideTheKeysTenants. The acme key's job is narrowed to
// the dead letters whose payload names an acme tenant; the one whose
// execution name maps it to beta-9 is refused and publishes nothing, the
// acme one is done and its tenant appears. An unrestricted key's job then
// requeues all three (the acme one again, which publishes nothing more).
// Each report says what SUBSTATE_AUDIT holds, member by member.
func TestRequeueJob(t *testing.T) {
	w, _ := deadLetteredThenFixed(t)
	ctx := context.Background()
	acme := &httpapi.Client{URL: w.HTTP.URL(), APIKey: acmeKey}
	req := substate.JobRequest{Action: substate.ActionRequeue, Filter: map[string]string{}, Reason: "tenant rule fixed"}
	pv, err := acme.PreviewJob(ctx, req)
	if err != nil || pv.Total != 2 || pv.WouldAct != 2 {
		t.Fatalf("the acme key's dry run: %+v %v, want the 2 dead letters naming an acme tenant", pv, err)
	}
	report := runJob(t, acme, req, pv.Total)
	if got, want := report, map[string]string{"acme-1": substate.AuditRefused, "acme-4": substate.AuditDone}; !maps.Equal(got, want) {
		t.Fatalf("the acme key's job: %v, want %v", got, want)
	}
	waitTenant(t, w, "acme-4")
	if _, err := w.View.Tenant(ctx, "beta-9"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Fatalf("beta-9 after the acme key's job: %v, want not found", err)
	}

	root := &httpapi.Client{URL: w.HTTP.URL(), APIKey: rootKey}
	report = runJob(t, root, req, 3)
	if got, want := report, map[string]string{"acme-1": substate.AuditDone, "acme-4": substate.AuditDone, "": substate.AuditDone}; !maps.Equal(got, want) {
		t.Fatalf("the root key's job: %v, want %v", got, want)
	}
	for _, tenant := range []string{"beta-9", "beta-7"} {
		waitTenant(t, w, tenant)
	}
}

// runJob creates a job of n members, waits for its end, and returns each
// member's outcome by the tenant its dead letter lists, having checked
// that the report is what the audit trail holds.
func runJob(t *testing.T, c *httpapi.Client, req substate.JobRequest, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	req.ExpectedCount = &n
	j, err := c.CreateJob(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		if j, err = c.Job(ctx, j.ID); err != nil || !j.State.Final() {
			return fmt.Sprintf("job %s: %s %+v %v", j.ID, j.State, j.Progress, err)
		}
		return ""
	})
	rep, err := c.JobReport(ctx, j.ID, substate.JobReportQuery{})
	if err != nil || len(rep.Members) != n || j.State != substate.JobDone {
		t.Fatalf("job %s %s: report %+v %v", j.ID, j.State, rep.Members, err)
	}
	out := map[string]string{}
	for _, m := range rep.Members {
		out[m.TenantID] = m.Outcome
		if m.AuditID != substate.JobAuditID(j.ID, m.Member) {
			t.Errorf("member %d: audit id %q, want the job's %q", m.Member, m.AuditID, substate.JobAuditID(j.ID, m.Member))
		}
	}
	return out
}

// waitTenant waits until the view shows the tenant's failed execution.
func waitTenant(t *testing.T, w *workertest.Worker, tenant string) {
	t.Helper()
	workertest.Eventually(t, func() string {
		if v, err := w.View.Tenant(context.Background(), tenant); err != nil || v.WorkflowSubState != substate.StateFailed {
			return fmt.Sprintf("tenant %s: %+v %v", tenant, v, err)
		}
		return ""
	})
}
