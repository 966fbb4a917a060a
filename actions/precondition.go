package actions

import (
	"fmt"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// refusal says why the action would be refused on a member as the view
// (or, for a dead letter, the dead-letter stream) shows it now, or "":
// the check a dry run counts and a job makes before it asks a provider,
// so the two agree, by the provider's rules. The provider's own answer,
// when the job asks, is the last word.
func refusal(rules map[substate.Provider]substate.ProviderRules, action substate.ExecutionAction, m substate.JobMember, now time.Time) string {
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
		return retryRefusal(rules, m, now)
	}
	return ""
}

// retryRefusal says why a member's execution cannot be retried, or "": as
// its provider's rules say, or, when they say nothing, unless it failed.
func retryRefusal(rules map[substate.Provider]substate.ProviderRules, m substate.JobMember, now time.Time) string {
	if f := rulesOf(rules, m.Provider).RetryRefusal; f != nil {
		return f(m, now)
	}
	if m.SubState != substate.StateFailed {
		return fmt.Sprintf("only a failed execution can be retried; this one is %s", m.SubState)
	}
	return ""
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
