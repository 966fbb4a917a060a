package substate

import (
	"context"
	"encoding/json"
	"time"
)

// Outcomes of a transition: what one canonical event did to its tenant's view.
const (
	OutcomeChanged   = "changed"   // the view changed
	OutcomeUnchanged = "unchanged" // newer, but nothing the view is written for changed
	OutcomeStale     = "stale"     // not newer than the view: late, duplicate or older execution
	OutcomeInvalid   = "invalid"   // not a canonical event; the projector dead-letters it
)

// ViewState is the part of a tenant's view that the projection rules decide.
type ViewState struct {
	SubState     SubState `json:"subState"`
	Verb         Verb     `json:"verb"`
	ExecutionID  string   `json:"executionId"`
	RetryCount   int      `json:"retryCount"`
	ErrorMessage string   `json:"errorMessage"`
	Step         string   `json:"step"`
}

// StateOf returns the rule-decided part of a view.
func StateOf(v TenantView) ViewState {
	return ViewState{
		SubState: v.WorkflowSubState, Verb: v.WorkflowVerb, ExecutionID: v.WorkflowExecutionID,
		RetryCount: v.WorkflowRetryCount, ErrorMessage: v.WorkflowErrorMessage, Step: v.WorkflowStep,
	}
}

// Transition is one canonical event of a tenant's history and what it did
// to the tenant's view: Old and New are the view before and after it, folded
// from the tenant's whole retained history with the projector's rules.
type Transition struct {
	Seq           uint64    `json:"seq"`      // stream sequence in SUBSTATE_EVENTS
	StoredAt      time.Time `json:"storedAt"` // when SUBSTATE_EVENTS stored the event
	EventID       string    `json:"eventId"`
	OccurredAt    time.Time `json:"occurredAt"` // when it happened at the provider
	Provider      Provider  `json:"provider"`
	ExecutionID   string    `json:"executionId"`
	ProviderState string    `json:"providerState"`
	Revision      Revision  `json:"revision"`
	Outcome       string    `json:"outcome"`                // one of the Outcome constants
	NewExecution  bool      `json:"newExecution,omitempty"` // the event's execution replaced the one the view followed
	Old           ViewState `json:"old"`
	New           ViewState `json:"new"`
	Reason        string    `json:"reason,omitempty"` // why an invalid event was rejected
	// TraceID is the trace the event belongs to: the trace id of its
	// CloudEvents traceparent, when it carried one.
	TraceID string `json:"traceId,omitempty"`
	// TraceURL is the trace in the operator's trace UI (the worker's
	// --trace-ui-url with TraceID in place of {traceId}), when one is set.
	TraceURL string    `json:"traceUrl,omitempty"`
	Raw      *Evidence `json:"raw,omitempty"` // the provider's own payload, when asked for
}

// Evidence is the raw provider payload behind a canonical event, or why it
// cannot be shown.
type Evidence struct {
	Seq      uint64          `json:"seq,omitempty"` // stream sequence in SUBSTATE_RAW
	ID       string          `json:"id,omitempty"`
	Kind     RawKind         `json:"kind,omitempty"`
	StoredAt time.Time       `json:"storedAt,omitzero"`
	Body     json.RawMessage `json:"body,omitempty"`    // compact JSON (a JSON string when the payload is not JSON)
	Missing  string          `json:"missing,omitempty"` // why there is no body
}

// HistoryQuery selects part of one tenant's history. Since and Until bound
// the time SUBSTATE_EVENTS stored an event (zero: unbounded); AfterSeq and
// Limit page through the result (Limit 0: no limit).
type HistoryQuery struct {
	TenantID     string
	Since, Until time.Time
	AfterSeq     uint64
	Limit        int
	Raw          bool // attach the raw evidence of each transition
}

// HistoryPage is one page of a tenant's history, oldest first.
type HistoryPage struct {
	TenantID    string       `json:"tenantId"`
	Transitions []Transition `json:"transitions"`
	// Actions are the operator actions on the tenant (SUBSTATE_AUDIT:
	// who, why, the outcome, the fleet job) recorded in the span of the
	// page's transitions, oldest first: a timeline interleaves them with
	// the transitions by time (an action's time, a transition's
	// storedAt). The last page holds those after its last transition.
	Actions []AuditEvent `json:"actions"`
	// ActionsCut reports that the span held more operator actions than a
	// page keeps (10,000): Actions are the oldest of them. Narrow the
	// span (since, until, limit) or read SUBSTATE_AUDIT for the rest.
	ActionsCut bool `json:"actionsCut,omitempty"`
	// NextAfterSeq, when not 0, is the AfterSeq of the next page.
	NextAfterSeq uint64 `json:"nextAfterSeq,omitempty"`
}

// HistoryReader reads tenants' histories from the retained streams.
type HistoryReader interface {
	History(ctx context.Context, q HistoryQuery) (HistoryPage, error)
}
