package actions_test

import (
	"context"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// TestCreateRefused: a request that cannot make the job it asks for is
// refused with why, and creates nothing: a filter that matches nothing, a
// set of another size than the one previewed, a filter outside the key's
// tenants, an action that is not one.
func TestCreateRefused(t *testing.T) {
	f := newFleet(t)
	f.failTenants(t, "acme-", 3)
	f.start(t)
	ctx := context.Background()
	two := 2
	for _, tc := range []struct {
		name string
		req  substate.JobRequest
		code string
		says string
	}{
		{"MatchesNothing", request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "beta-"}), substate.ECONFLICT, "matches nothing"},
		{"NotThePreviewedSize", func() substate.JobRequest {
			r := request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"})
			r.ExpectedCount = &two
			return r
		}(), substate.ECONFLICT, "now matches 3, not the 2 previewed"},
		{"OutsideTheKey", func() substate.JobRequest {
			r := request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"})
			r.Scope = "beta-"
			return r
		}(), substate.EFORBIDDEN, "outside the key's tenants"},
		{"UnknownAction", request("delete", substate.TenantFilter{TenantPrefix: "acme-"}), substate.EINVALID, "delete"},
		{"KillOfARetry", func() substate.JobRequest {
			r := request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "acme-"})
			r.Kill = true
			return r
		}(), substate.EINVALID, "kill applies to stop only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Create(ctx, tc.req)
			if got := substate.ErrorCode(err); got != tc.code || !strings.Contains(substate.ErrorMessage(err), tc.says) {
				t.Errorf("Create: %v (%s), want %s saying %q", err, got, tc.code, tc.says)
			}
		})
	}
	if jobs, err := f.svc.Jobs(ctx, 10); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after refused requests: %+v %v, want none", jobs, err)
	}
	pv, err := f.svc.Preview(ctx, request(substate.ActionRetry, substate.TenantFilter{TenantPrefix: "beta-"}))
	if err != nil || pv.Total != 0 {
		t.Errorf("dry run of a filter that matches nothing: %+v %v, want an empty preview", pv, err)
	}
}
