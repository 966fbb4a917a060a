package main

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// TestPrintResult: an action is printed as done only for the outcome
// done; a pending stop says so, and what happens next, never "stopped".
func TestPrintResult(t *testing.T) {
	base := substate.ExecutionResult{Action: substate.ActionStop, Provider: substate.ProviderRestate, ExecutionID: "inv_1", TenantID: "beta", AuditID: "audit-1"}
	for _, tc := range []struct {
		outcome, next string
		want, not     string
	}{
		{substate.AuditDone, "", "stopped restate execution inv_1", "pending"},
		{substate.AuditPending, "substate keeps checking", "stop of restate execution inv_1 is pending, not yet effective (tenant beta, audit audit-1): substate keeps checking", "stopped"},
		{substate.AuditSkipped, "changed: the tenant is now failed", "skipped", "stopped"},
	} {
		res := base
		res.Outcome, res.Next = tc.outcome, tc.next
		var b strings.Builder
		printResult(&b, substate.ActionStop, res)
		if got := b.String(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("%s: printed %q, want %q and no %q", tc.outcome, got, tc.want, tc.not)
		}
	}
	// A dry run says it passes only when nothing refused it: a refused one
	// (a --kill Step Functions has none for) says it would be refused and
	// why, never that it would be accepted.
	for _, tc := range []struct {
		outcome, next string
		want          string
	}{
		{"", "", "dry run: stop of stepfunctions execution arn:x (tenant beta) passes substate's checks"},
		{substate.AuditRefused, "Step Functions has no kill", "dry run: stop of stepfunctions execution arn:x (tenant beta) would be refused: Step Functions has no kill"},
		{substate.AuditSkipped, "changed: the tenant is now failed", "would be skipped: changed: the tenant is now failed"},
	} {
		res := base
		res.Provider, res.ExecutionID, res.DryRun, res.Outcome, res.Next = substate.ProviderStepFunctions, "arn:x", true, tc.outcome, tc.next
		var b strings.Builder
		printResult(&b, substate.ActionStop, res)
		got := b.String()
		if !strings.Contains(got, tc.want) || strings.Contains(got, "would be accepted") || (tc.outcome != "" && strings.Contains(got, "passes")) {
			t.Errorf("dry run %q: printed %q, want %q", tc.outcome, got, tc.want)
		}
	}
}
