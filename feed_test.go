package substate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

func TestChangeSubject(t *testing.T) {
	for _, tt := range []struct {
		name, tenant string
		sub          substate.SubState
		provider     substate.Provider
		want         string
	}{
		{"OK", "acme", substate.StateFailed, substate.ProviderRestate, "substate.changes.failed.restate.acme"},
		{"Dots", "acme.corp *>", substate.StateBackingOff, substate.ProviderStepFunctions, "substate.changes.backing-off.stepfunctions.acme~2Ecorp~20~2A~3E"},
		{"NoProvider", "t", substate.StateSucceeded, "", "substate.changes.succeeded.~.t"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := substate.Change{TenantID: tt.tenant, New: substate.TenantView{WorkflowSubState: tt.sub, Provider: tt.provider}}
			got := substate.ChangeSubject(&c)
			if got != tt.want {
				t.Fatalf("ChangeSubject = %q, want %q", got, tt.want)
			}
			toks := strings.Split(strings.TrimPrefix(got, substate.SubjectChangesPrefix), ".")
			if len(toks) != 3 {
				t.Fatalf("%q has %d tokens after the prefix, want 3", got, len(toks))
			}
			if id, err := substate.DecodeToken(toks[2]); err != nil || id != tt.tenant {
				t.Fatalf("tenant token decodes to %q, %v; want %q", id, err, tt.tenant)
			}
		})
	}
}

func TestChangeType(t *testing.T) {
	base := substate.TenantView{TenantID: "t", WorkflowSubState: substate.StateRunning, WorkflowVerb: substate.StateRunning.Verb(),
		WorkflowExecutionID: "e1", WorkflowRetryCount: 1, WorkflowErrorMessage: "boom", WorkflowStep: "a"}
	for _, tt := range []struct {
		name string
		edit func(v *substate.TenantView)
		want string
	}{
		{"SubState", func(v *substate.TenantView) { v.WorkflowSubState, v.WorkflowRetryCount = substate.StateBackingOff, 2 }, substate.ChangeTypeSubState},
		{"Execution", func(v *substate.TenantView) { v.WorkflowExecutionID, v.WorkflowRetryCount = "e2", 0 }, substate.ChangeTypeExecution},
		{"Retry", func(v *substate.TenantView) { v.WorkflowRetryCount, v.WorkflowErrorMessage = 2, "again" }, substate.ChangeTypeRetry},
		{"Error", func(v *substate.TenantView) { v.WorkflowErrorMessage = "other" }, substate.ChangeTypeError},
		{"Step", func(v *substate.TenantView) { v.WorkflowStep = "b" }, substate.ChangeTypeStep},
		{"Internal", func(*substate.TenantView) {}, substate.ChangeTypeExecution},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := substate.Change{Old: base, New: base}
			tt.edit(&c.New)
			if got := substate.ChangeType(&c); got != tt.want {
				t.Fatalf("ChangeType = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChangeEventRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	c := substate.Change{Seq: 42, TenantID: "acme corp",
		Old: substate.TenantView{TenantID: "acme corp"},
		New: substate.TenantView{TenantID: "acme corp", WorkflowSubState: substate.StateFailed, UpdatedAt: at}}
	b, err := substate.MarshalChangeEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := substate.UnmarshalChangeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.Time, "2026-11-01T09:00:00.000Z"; got != want {
		t.Errorf("time = %q, want %q (UTC, three fractional digits)", got, want)
	}
	if e.ID != "42" || e.Subject != "acme corp" || e.Type != substate.ChangeTypeSubState || e.Data.Seq != 42 {
		t.Errorf("event %+v", e)
	}
	if _, err := substate.UnmarshalChangeEvent([]byte(`{"specversion":"0.3"}`)); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("UnmarshalChangeEvent(other) = %v, want EINVALID", err)
	}
}
