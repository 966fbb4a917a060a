package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestFleetDryRunRefusals: a dry run says which members a job would
// refuse and why, before any provider call: on Step Functions, a retry of
// an execution that stopped more than 14 days ago (the redrive window)
// and of one still running, a stop of ended ones; and, from the worker's
// IAM probes, every member when the credentials lack the action's
// permission. Nothing is asked of Step Functions but the probes.
func TestFleetDryRunRefusals(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	machine := srv.AddStateMachine("provision", `{"StartAt":"A","States":{"A":{"Type":"Pass","End":true}}}`, "arn:aws:iam::123456789012:role/sfn")
	now := time.Now().UTC()
	old := now.Add(-15 * 24 * time.Hour)
	execs := []struct {
		tenant, status string
		stopped        time.Time
	}{
		{"dr-fresh", "FAILED", now}, {"dr-old", "FAILED", old}, {"dr-running", "RUNNING", time.Time{}},
	}
	w := workertest.Start(t, func(f *worker.Flags) { f.ReconcileAfter = time.Hour })
	for _, x := range execs {
		name := x.tenant + "-run"
		srv.AddExecution(awstest.Execution{ARN: awstest.ExecutionARN(machine, name), StateMachineARN: machine, Name: name, Status: x.status,
			Input: `{"tenantId":"` + x.tenant + `"}`, StartDate: now.Add(-16 * 24 * time.Hour), StopDate: x.stopped})
		at := x.stopped
		if at.IsZero() {
			at = now
		}
		ev := sfnEvent("ev-"+x.tenant, x.tenant, name, x.status, now.Add(-16*24*time.Hour), at, map[bool]string{true: "boom"}[x.status == "FAILED"])
		if code := workertest.Post(t, w.HTTP.URL()+"/v1/ingest/eventbridge", ev, nil); code != http.StatusAccepted {
			t.Fatalf("ingest: %d", code)
		}
	}
	c := &httpapi.Client{URL: w.HTTP.URL()}
	ctx := context.Background()
	workertest.Eventually(t, func() string {
		page, err := c.Tenants(ctx, substate.TenantFilter{TenantPrefix: "dr-"})
		if err != nil || len(page.Tenants) != 3 {
			return fmt.Sprintf("tenants: %+v %v", page.Tenants, err)
		}
		return ""
	})
	preview := func(action substate.ExecutionAction) substate.JobPreview {
		t.Helper()
		pv, err := c.PreviewJob(ctx, substate.JobRequest{Action: action, Filter: map[string]string{"tenantPrefix": "dr-"}})
		if err != nil || pv.Total != 3 {
			t.Fatalf("dry run of %s: %+v %v", action, pv, err)
		}
		return pv
	}
	refused := func(pv substate.JobPreview) map[string]string {
		out := map[string]string{}
		for _, r := range pv.Reasons {
			out[r.SampleTenantID] = r.Reason
		}
		return out
	}
	srv.ResetCalls()

	t.Run("Preconditions", func(t *testing.T) {
		pv := preview(substate.ActionRetry)
		why := refused(pv)
		if pv.WouldAct != 1 || pv.Sample[0].TenantID != "dr-fresh" || !strings.Contains(why["dr-old"], "within 14 days") ||
			!strings.Contains(why["dr-running"], "redrives only failed") {
			t.Errorf("retry: %d would act (%+v), refused %v", pv.WouldAct, pv.Sample, why)
		}
		pv = preview(substate.ActionStop)
		if why := refused(pv); pv.WouldAct != 1 || pv.Sample[0].TenantID != "dr-running" || len(pv.Reasons) != 1 || pv.Reasons[0].Count != 2 ||
			!strings.Contains(pv.Reasons[0].Reason, "already ended") {
			t.Errorf("stop: %d would act (%+v), refused %v", pv.WouldAct, pv.Sample, why)
		}
	})
	t.Run("MissingPermission", func(t *testing.T) {
		srv.Deny("RedriveExecution", 1)
		pv := preview(substate.ActionRetry)
		if pv.WouldAct != 0 || len(pv.Sample) != 0 || !strings.Contains(refused(pv)["dr-fresh"], "lack the IAM permission states:RedriveExecution") {
			t.Errorf("retry without states:RedriveExecution: %d would act, refused %+v", pv.WouldAct, pv.Reasons)
		}
	})
	for _, op := range []string{"RedriveExecution", "StopExecution", "StartExecution"} {
		for _, call := range srv.Log() {
			if call.Op == op && strings.HasPrefix(call.ExecutionARN, awstest.ExecutionARN(machine, "dr-")) {
				t.Errorf("a dry run called %s on %s", op, call.ExecutionARN)
			}
		}
	}
	if jobs, err := c.Jobs(ctx, 10); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after dry runs: %+v %v", jobs, err)
	}
}
