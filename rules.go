package substate

import "time"

// Operations of a fleet job's lane beside the actions themselves, which
// cost provider API calls too (ProviderRules.Costs).
const (
	// OpDescribe reads an execution before an action on it.
	OpDescribe = "describe"
	// OpPoll reads the status published after an action.
	OpPoll = "poll"
)

// APIBucket is a token bucket on a provider API: up to Size calls at
// once, refilled at Rate a second.
type APIBucket struct {
	Size int
	Rate float64
}

// ProviderRules are what a provider allows and what its API costs, known
// without asking it: a fleet job's lane limits and the calls each of its
// operations makes, the retries the provider refuses as the view shows an
// execution (so a dry run counts what a job would do), and what it may be
// doing with an action it accepted whose effect is not seen yet. Each
// provider's package (providers/…) gives its own; the worker hands them
// to the packages that act on executions.
type ProviderRules struct {
	// Concurrency is how many members of a job the provider's lane acts
	// on at once.
	Concurrency int
	// APIs are the token buckets of the provider's APIs: its quotas.
	APIs map[string]APIBucket
	// Costs are the API calls of each operation of a lane: OpDescribe,
	// OpPoll and each ExecutionAction (by its name). An operation it does
	// not list costs nothing.
	Costs map[string][]string
	// RetryRefusal says why the provider would refuse to retry the
	// member's execution as the view shows it at now, or "". Nil: only a
	// failed execution can be retried.
	RetryRefusal func(m JobMember, now time.Time) string
	// Pending returns next, what substate says it does about an accepted
	// action whose effect is not seen yet, with what the provider may be
	// doing meanwhile. Nil keeps next as it is.
	Pending func(req ExecutionRequest, res ExecutionResult, next string) string
}
