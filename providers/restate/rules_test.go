package restate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
)

// TestRules: Restate resumes only a paused, suspended or backing-off
// invocation, and a pending cancel or resume says what Restate may be
// doing meanwhile.
func TestRules(t *testing.T) {
	r := restate.Rules()
	t.Run("RetryRefusal", func(t *testing.T) {
		for _, s := range []string{"paused", "suspended", "backing-off"} {
			if why := r.RetryRefusal(substate.JobMember{Provider: substate.ProviderRestate, ProviderState: s}, time.Now()); why != "" {
				t.Errorf("%s: refused: %s", s, why)
			}
		}
		m := substate.JobMember{Provider: substate.ProviderRestate, ProviderState: "running", SubState: substate.StateRunning}
		if why := r.RetryRefusal(m, time.Now()); !strings.Contains(why, "Restate resumes only") || !strings.Contains(why, "this one is running") {
			t.Errorf("running: %q", why)
		}
	})
	t.Run("Pending", func(t *testing.T) {
		res := substate.ExecutionResult{Provider: substate.ProviderRestate, Execution: substate.ExecutionInfo{ProviderState: "paused", Attempts: 3}}
		stop := r.Pending(substate.ExecutionRequest{Action: substate.ActionStop}, res, "NEXT")
		if !strings.HasPrefix(stop, "Restate delivers a cancel") || !strings.HasSuffix(stop, "NEXT; `substate executions stop --kill` ends it at once") {
			t.Errorf("stop: %q", stop)
		}
		if kill := r.Pending(substate.ExecutionRequest{Action: substate.ActionStop, Kill: true}, res, "NEXT"); kill != "NEXT" {
			t.Errorf("kill: %q", kill)
		}
		retry := r.Pending(substate.ExecutionRequest{Action: substate.ActionRetry}, res, "NEXT")
		if !strings.Contains(retry, "is paused again") || !strings.Contains(retry, "(3 before the retry)") || !strings.HasSuffix(retry, "; NEXT") {
			t.Errorf("retry: %q", retry)
		}
		if restart := r.Pending(substate.ExecutionRequest{Action: substate.ActionRestart}, res, "NEXT"); restart != "NEXT" {
			t.Errorf("restart: %q", restart)
		}
	})
}
