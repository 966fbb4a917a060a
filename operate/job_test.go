package operate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// TestJobActions: an action of a fleet job records every outcome under
// the job (refusals before any call included), leaves throttling to the
// job, records an intent before the call, and decides an action it may
// have asked for before a restart from the provider's state.
func TestJobActions(t *testing.T) {
	failed := substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "failed", Ended: true, Retryable: true}
	running := substate.ExecutionInfo{ExecutionID: "x1", Provider: substate.ProviderEngine, ProviderState: "running"}
	job := func(action substate.ExecutionAction) substate.ExecutionRequest {
		return substate.ExecutionRequest{TenantID: "t1", Action: action, Who: "ops", Job: "job-1", Member: 7, ExecutionID: "x1"}
	}
	ctx := context.Background()
	t.Run("RefusedIsRecorded", func(t *testing.T) {
		s, op, a := newService(running)
		res, err := s.Act(ctx, job(substate.ActionRetry))
		evs := a.events()
		if err != nil || res.Outcome != substate.AuditRefused || len(op.calls) != 0 || len(evs) != 1 ||
			evs[0].ID != "job-1.7" || evs[0].Job != "job-1" || evs[0].Member != 7 || evs[0].ErrorCode != substate.ECONFLICT {
			t.Fatalf("res %+v %v, calls %v, audit %+v", res, err, op.calls, evs)
		}
	})
	t.Run("ThrottledIsTheJobs", func(t *testing.T) {
		s, op, a := newService(failed)
		op.fail = substate.Errorf(substate.ETHROTTLED, "Rate exceeded")
		intents := 0
		req := job(substate.ActionRetry)
		req.Intent = func(context.Context, substate.ExecutionInfo) error { intents++; return nil }
		_, err := s.Act(ctx, req)
		if substate.ErrorCode(err) != substate.ETHROTTLED || len(a.events()) != 0 || intents != 1 || len(op.calls) != 1 {
			t.Fatalf("err %v, audit %v, intents %d, calls %v", err, a.events(), intents, op.calls)
		}
	})
	t.Run("GoneFromTheViewIsSkipped", func(t *testing.T) {
		s, op, a := newService(failed)
		req := job(substate.ActionRetry)
		req.TenantID = "nobody"
		res, err := s.Act(ctx, req)
		if err != nil || res.Outcome != substate.AuditSkipped || !strings.HasPrefix(res.Next, "changed:") || len(op.calls) != 0 || len(a.events()) != 1 {
			t.Fatalf("res %+v %v, calls %v", res, err, op.calls)
		}
	})
	t.Run("InDoubtAndTaken", func(t *testing.T) {
		s, op, a := newService(running) // the retry before the restart took effect
		req := job(substate.ActionRetry)
		req.Before = &failed
		res, err := s.Act(ctx, req)
		if err != nil || res.Outcome != substate.AuditDone || len(op.calls) != 0 || len(a.events()) != 1 {
			t.Fatalf("res %+v %v, calls %v", res, err, op.calls)
		}
	})
	t.Run("InDoubtNotTaken", func(t *testing.T) {
		s, op, _ := newService(failed) // still failed: asked again
		req := job(substate.ActionRetry)
		req.Before = &failed
		if _, err := s.Act(ctx, req); err != nil || len(op.calls) != 1 {
			t.Fatalf("%v, calls %v", err, op.calls)
		}
	})
	t.Run("InDoubtRestartWithoutKey", func(t *testing.T) {
		s, op, a := newService(failed) // the fake operator honors no idempotency key
		req := job(substate.ActionRestart)
		req.Before = &failed
		res, err := s.Act(ctx, req)
		if err != nil || res.Outcome != substate.AuditUnknown || len(op.calls) != 0 || len(a.events()) != 1 {
			t.Fatalf("res %+v %v, calls %v", res, err, op.calls)
		}
	})
}
