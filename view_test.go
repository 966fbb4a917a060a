package substate_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// TestCheckLengths: a fingerprint, step or workflow type as long as the
// view keeps passes; one byte more is refused as invalid, naming the
// field.
func TestCheckLengths(t *testing.T) {
	tests := []struct {
		name string
		f    substate.TenantFilter
		err  string // "" for none
	}{
		{"Empty", substate.TenantFilter{}, ""},
		{"AtTheBounds", substate.TenantFilter{Fingerprint: strings.Repeat("f", substate.MaxFingerprintBytes),
			Step: strings.Repeat("s", substate.MaxStepBytes), WorkflowType: strings.Repeat("w", substate.MaxWorkflowTypeBytes)}, ""},
		{"LongFingerprint", substate.TenantFilter{Fingerprint: strings.Repeat("f", substate.MaxFingerprintBytes+1)}, "fingerprint: longer than 200 bytes"},
		{"LongStep", substate.TenantFilter{Step: strings.Repeat("s", substate.MaxStepBytes+1)}, "step: longer than 256 bytes"},
		{"LongWorkflowType", substate.TenantFilter{WorkflowType: strings.Repeat("w", substate.MaxWorkflowTypeBytes+1)}, "workflowType: longer than 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.CheckLengths()
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(substate.ErrorMessage(err), tt.err)):
				t.Fatalf("error %v, want EINVALID saying %q", err, tt.err)
			}
		})
	}
}
