package actions

import (
	"fmt"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// RedriveWindow is how long after an execution stopped Step Functions lets
// it be redriven.
const RedriveWindow = 14 * 24 * time.Hour

// restateResumable are the Restate invocation statuses a resume applies to.
var restateResumable = []string{"paused", "backing-off", "suspended"}

// refusal says why the action would be refused on a member as the view
// (or, for a dead letter, the dead-letter stream) shows it now, or "":
// the check a dry run counts and a job makes before it asks a provider,
// so the two agree. The provider's own answer, when the job asks, is the
// last word.
func refusal(action substate.ExecutionAction, m substate.JobMember, now time.Time) string {
	if action == substate.ActionRequeue {
		if m.RawSeq == 0 {
			return "the dead letter is not a raw message kept in " + substate.StreamRaw + ": there is nothing to map again"
		}
		return ""
	}
	if m.ExecutionID == "" {
		return fmt.Sprintf("the tenant has no execution to act on (it is %s; a succeeded execution is not kept)", m.SubState)
	}
	switch action {
	case substate.ActionStop:
		if m.SubState.Terminal() {
			return fmt.Sprintf("the execution already ended (%s): there is nothing to stop", m.SubState)
		}
	case substate.ActionRestart:
		if !m.SubState.Terminal() {
			return fmt.Sprintf("the execution is still %s: stop it before starting it again", m.SubState)
		}
	case substate.ActionRetry:
		return retryRefusal(m, now)
	}
	return ""
}

// retryRefusal says why a member's execution cannot be retried, or "".
func retryRefusal(m substate.JobMember, now time.Time) string {
	switch m.Provider {
	case substate.ProviderStepFunctions:
		if m.SubState != substate.StateFailed {
			return fmt.Sprintf("Step Functions redrives only failed, timed-out or aborted executions; this one is %s", state(m))
		}
		if !m.Since.IsZero() && now.Sub(m.Since) > RedriveWindow {
			return fmt.Sprintf("Step Functions redrives an execution only within 14 days of its stop; this one stopped on %s", m.Since.UTC().Format(time.DateOnly))
		}
	case substate.ProviderRestate:
		for _, s := range restateResumable {
			if m.ProviderState == s {
				return ""
			}
		}
		return fmt.Sprintf("Restate resumes only paused, suspended or backing-off invocations; this one is %s (restart starts a completed one again)", state(m))
	default:
		if m.SubState != substate.StateFailed {
			return fmt.Sprintf("only a failed execution can be retried; this one is %s", m.SubState)
		}
	}
	return ""
}

// state is a member's provider state, else its sub-state.
func state(m substate.JobMember) string {
	if m.ProviderState != "" {
		return m.ProviderState
	}
	return string(m.SubState)
}

// outsideScope says why a member is outside a job's tenant scope, or "".
func outsideScope(m substate.JobMember, scope string) string {
	if strings.HasPrefix(m.TenantID, scope) {
		return ""
	}
	return fmt.Sprintf("tenant %s is outside the tenants of the key that created the job (prefix %q)", substate.QuotePrefix(m.TenantID, substate.QuoteLimit), scope)
}

// memberOf is a tenant's view as a job member.
func memberOf(v substate.TenantView) substate.JobMember {
	return substate.JobMember{
		TenantID: v.TenantID, Provider: v.Provider, ExecutionID: v.WorkflowExecutionID,
		SubState: v.WorkflowSubState, ProviderState: v.ProviderState, Since: v.WorkflowSubStateSince,
	}
}
