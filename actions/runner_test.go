package actions_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/substatehq/substate"
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
