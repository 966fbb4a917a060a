package stepfunctions_test

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
)

// TestRules: Step Functions' quotas are higher in the three large
// regions, and it redrives only a failed execution within 14 days of its
// stop.
func TestRules(t *testing.T) {
	t.Run("Regions", func(t *testing.T) {
		if got, want := stepfunctions.Rules("us-east-1").APIs["StartExecution"], (substate.APIBucket{Size: 1300, Rate: 300}); got != want {
			t.Errorf("us-east-1 StartExecution: %+v, want %+v", got, want)
		}
		if got, want := stepfunctions.Rules("eu-central-1").APIs["StartExecution"], (substate.APIBucket{Size: 800, Rate: 150}); got != want {
			t.Errorf("eu-central-1 StartExecution: %+v, want %+v", got, want)
		}
	})
	t.Run("RetryRefusal", func(t *testing.T) {
		now := time.Date(2026, 3, 20, 0, 0, 0, 0, time.UTC)
		refusal := stepfunctions.Rules("").RetryRefusal
		failed := substate.JobMember{Provider: substate.ProviderStepFunctions, SubState: substate.StateFailed, ProviderState: "FAILED"}
		if failed.Since = now.Add(-stepfunctions.RedriveWindow + time.Hour); refusal(failed, now) != "" {
			t.Errorf("failed within the window: %q", refusal(failed, now))
		}
		if failed.Since = now.Add(-stepfunctions.RedriveWindow - time.Hour); !strings.Contains(refusal(failed, now), "within 14 days of its stop; this one stopped on 2026-03-05") {
			t.Errorf("failed before the window: %q", refusal(failed, now))
		}
		running := substate.JobMember{Provider: substate.ProviderStepFunctions, SubState: substate.StateRunning, ProviderState: "RUNNING"}
		if why := refusal(running, now); !strings.Contains(why, "redrives only failed") || !strings.Contains(why, "this one is RUNNING") {
			t.Errorf("running: %q", why)
		}
	})
}
