package restate

import (
	"fmt"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

// resumable are the invocation statuses Restate resumes.
var resumable = []string{"paused", "backing-off", "suspended"}

// Rules are Restate's rules for acting on its invocations. Its admin API
// is one server: a bounded concurrency and 100 calls a second; a describe
// reads the invocation's row and, for one that failed, its journal, every
// other operation is one call. Only a paused, suspended or backing-off
// invocation is resumed. A cancel is delivered when the handler next
// runs, and a resumed invocation that fails again looks like one not yet
// resumed: the text of a pending stop or retry says so.
func Rules() substate.ProviderRules {
	return substate.ProviderRules{
		Concurrency: 4,
		APIs:        map[string]substate.APIBucket{"admin": {Size: 100, Rate: 100}},
		Costs: map[string][]string{
			substate.OpDescribe:            {"admin", "admin"},
			substate.OpPoll:                {"admin"},
			string(substate.ActionStop):    {"admin"},
			string(substate.ActionRetry):   {"admin"},
			string(substate.ActionRestart): {"admin"},
		},
		RetryRefusal: retryRefusal,
		Pending:      pending,
	}
}

// retryRefusal says why Restate would not resume the member's invocation
// as the view shows it, or "".
func retryRefusal(m substate.JobMember, _ time.Time) string {
	if slices.Contains(resumable, m.ProviderState) {
		return ""
	}
	return fmt.Sprintf("Restate resumes only paused, suspended or backing-off invocations; this one is %s (restart starts a completed one again)", m.State())
}

// pending adds to next what Restate may be doing with a cancel or a
// resume it accepted.
func pending(req substate.ExecutionRequest, res substate.ExecutionResult, next string) string {
	switch {
	case req.Action == substate.ActionStop && !req.Kill:
		return "Restate delivers a cancel when the invocation's handler next runs, which a backing-off invocation may not do for a long time, and a handler that fails before it reads its context never sees it; " +
			next + "; `substate executions stop --kill` ends it at once"
	case req.Action == substate.ActionRetry:
		return fmt.Sprintf("Restate runs a resumed invocation at once, and one that fails again is %s again, which looks the same as a resume not yet taken: "+
			"its attempts in `substate executions describe` (%d before the retry) tell whether it ran; ", res.Execution.ProviderState, res.Execution.Attempts) + next
	}
	return next
}
