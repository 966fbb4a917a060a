package substate

import (
	"context"
	"time"
)

// TenantView is the current workflow status of one tenant, as served by
// GET /v1/tenants/{id}. Unset fields are the empty string or 0.
type TenantView struct {
	TenantID string `json:"tenantId"`
	// WorkflowType is the workflow the execution runs: the event's
	// workflow (Step Functions state machine, Restate service, engine
	// workflow name).
	WorkflowType     string   `json:"workflowType"`
	WorkflowSubState SubState `json:"workflowSubState"`
	// WorkflowSubStateSince is when the tenant entered its sub-state: the
	// provider's time of the event that moved it there, or that started
	// the execution it is in.
	WorkflowSubStateSince time.Time `json:"workflowSubStateSince"`
	WorkflowVerb          Verb      `json:"workflowVerb"`
	WorkflowStatus        Status    `json:"workflowStatus"`
	WorkflowExecutionID   string    `json:"workflowExecutionId"`
	WorkflowRetryCount    int       `json:"workflowRetryCount"`
	// WorkflowNextRetryAt is when the provider retries the execution next,
	// while the tenant is backing-off and its provider said
	// (EventData.NextRetryAt); the zero time otherwise.
	WorkflowNextRetryAt  time.Time `json:"workflowNextRetryAt"`
	WorkflowErrorMessage string    `json:"workflowErrorMessage"`
	WorkflowErrorType    string    `json:"workflowErrorType"`
	// WorkflowErrorFingerprint groups the tenants one fault hit (see
	// EventData.ErrorFingerprint); it moves with the error message.
	WorkflowErrorFingerprint string    `json:"workflowErrorFingerprint"`
	WorkflowStep             string    `json:"workflowStep"`
	Provider                 Provider  `json:"provider"`
	ProviderState            string    `json:"providerState"`
	UpdatedAt                time.Time `json:"updatedAt"`
	LastEventAt              time.Time `json:"lastEventAt"`
	// Deadline is when the tenant becomes stuck if its view does not
	// change: the earlier of its sub-state's and its run's deadline under
	// the worker's SLOs, from WorkflowSubStateSince and the execution's
	// start; zero when no SLO applies or the tenant is terminal.
	// DeadlineSLO says which SLO it is: the sub-state's name, or run.
	// (Unset times are written as the zero time, as every time of the
	// view is: leaving them out would cost the JSON encoder an allocation
	// per field and view.)
	Deadline    time.Time `json:"deadline"`
	DeadlineSLO SLO       `json:"deadlineSlo"`
	// Stuck says the deadline passed and the view has not changed since;
	// StuckSince is that deadline. A change that moves the deadline (a new
	// sub-state, a new execution, the end) ends it.
	Stuck      bool      `json:"stuck"`
	StuckSince time.Time `json:"stuckSince"`
}

// Sequenced is a canonical event together with its stream sequence number in
// SUBSTATE_EVENTS, the unit the projector applies.
type Sequenced struct {
	Seq   uint64
	Event EventData
	// ID is the event's CloudEvents id (its Nats-Msg-Id). The view records
	// the id of the event at its checkpoint, so that a stream that holds
	// another message there, or none, is told from the one it applied.
	ID string
	// TraceParent is the event's W3C traceparent, if it carried one.
	TraceParent string
	// Hop is the traceparent of the span the projector applied the event
	// in, when tracing is on; a change the event makes keeps it.
	Hop string
}

// Change is one real change of a tenant's view, published on the change feed
// after the transaction that made it committed. Kind says whether it is a
// change an event made, or a tenant becoming stuck or moving on.
type Change struct {
	Seq      uint64     `json:"seq"`
	TenantID string     `json:"tenantId"`
	Old      TenantView `json:"old"`
	New      TenantView `json:"new"`
	// TraceParent is the W3C traceparent of the event that made the change,
	// carried to the change's CloudEvent; it is not part of the data.
	TraceParent string `json:"-"`
	// Hop is the traceparent of the span the projector applied the event
	// in (Sequenced.Hop), when tracing was on: the change feed's publish
	// span is its child. It is not part of the data.
	Hop string `json:"-"`
	// Kind is not part of the data either: the CloudEvent's type says it.
	Kind ChangeKind `json:"-"`
	// Encoded, when set, is the data (Seq, TenantID, Old and New) already
	// encoded as JSON: the outbox encodes a change to store it, and the
	// change feed's message carries those bytes instead of encoding the
	// change again (MarshalChangeEvent). Whoever modifies the data of a
	// change that has it must clear it.
	Encoded []byte `json:"-"`
}

// ChangeKind says what a message of the change feed reports. Of a
// tenant's messages with one sequence, the kinds happen in their order:
// the change, then unstuck (the change moved a stuck tenant on), then
// stuck (its new deadline passed too).
type ChangeKind uint8

// The kinds of change.
const (
	// ChangeFromEvent is a change an event made; Seq is that event's
	// sequence in SUBSTATE_EVENTS.
	ChangeFromEvent ChangeKind = iota
	// ChangeUnstuck is a stuck tenant that moved on; Seq is the sequence
	// of the change that moved it, which the feed also carries.
	ChangeUnstuck
	// ChangeStuck is a tenant whose deadline passed with no change; Seq
	// is the sequence of its last change.
	ChangeStuck
)

// ApplyResult reports what one applied batch did.
type ApplyResult struct {
	Changes   []Change // real changes, in stream order
	Unchanged int      // events that changed nothing (dirty check)
	Stale     int      // events older than what the view already holds
	Skipped   int      // events at or below the checkpoint (redeliveries)
	Committed bool     // whether a write transaction was committed
	// BytesWritten is what the transaction wrote to the view's storage.
	BytesWritten uint64
}

// TenantFilter selects tenants for GET /v1/tenants.
type TenantFilter struct {
	SubState      SubState // "" for any
	HasError      bool     // only tenants with an error message
	MinRetryCount int      // only tenants with at least this many retries
	SortRetryDesc bool     // order by retry count, highest first
	// SortUpdatedDesc orders by the view's last change, newest first; it
	// cannot be combined with SortRetryDesc.
	SortUpdatedDesc bool
	Provider        Provider // "" for any
	TenantPrefix    string   // only tenant ids that start with it
	// Fingerprint keeps the tenants with this error fingerprint.
	Fingerprint string
	// Step keeps the tenants at this step (WorkflowStep).
	Step string
	// WorkflowType keeps the tenants of this workflow type.
	WorkflowType string
	// Verb keeps the tenants with this verb form ("" for any): it tells
	// cancelled from failed.
	Verb Verb
	// InStateLongerThan keeps the tenants that entered their sub-state
	// more than this long ago (WorkflowSubStateSince).
	InStateLongerThan time.Duration
	// Stuck keeps the stuck tenants (TenantView.Stuck); false keeps all.
	Stuck bool
	// Reverse reads the order the other fields pick from its end: the
	// same tenants, in exactly the opposite order, so that a listing's
	// last page is its first page in reverse. With SortRetryDesc it is
	// retry count lowest first; with SortUpdatedDesc, oldest change first.
	Reverse   bool
	Limit     int    // page size; 0 means the store's default
	PageToken string // opaque token from a previous page
}

// CheckLengths refuses a fingerprint, step or workflow type longer than
// any the view keeps (MaxFingerprintBytes, MaxStepBytes,
// MaxWorkflowTypeBytes): no tenant could match it, and the query parser
// and the store bound it alike.
func (f *TenantFilter) CheckLengths() error {
	switch {
	case len(f.Fingerprint) > MaxFingerprintBytes:
		return Errorf(EINVALID, "fingerprint: longer than %d bytes, which no fingerprint is", MaxFingerprintBytes)
	case len(f.Step) > MaxStepBytes:
		return Errorf(EINVALID, "step: longer than %d bytes, which no step is", MaxStepBytes)
	case len(f.WorkflowType) > MaxWorkflowTypeBytes:
		return Errorf(EINVALID, "workflowType: longer than %d bytes, which no workflow type is", MaxWorkflowTypeBytes)
	}
	return nil
}

// TenantPage is one page of a tenant listing.
type TenantPage struct {
	Tenants       []TenantView `json:"tenants"`
	NextPageToken string       `json:"nextPageToken"`
}

// ViewStore is the tenant view: it applies sequenced events with the rules of
// the projection and answers queries from its indexes.
type ViewStore interface {
	// Apply applies a batch in one transaction, skipping sequences at or below
	// the stored checkpoint and storing the batch's last sequence with it.
	Apply(ctx context.Context, batch []Sequenced) (ApplyResult, error)
	// Tenant returns one tenant's view or an ENOTFOUND error.
	Tenant(ctx context.Context, id string) (TenantView, error)
	// Tenants returns one page of tenants matching the filter.
	Tenants(ctx context.Context, f TenantFilter) (TenantPage, error)
	// Checkpoint returns the last applied stream sequence.
	Checkpoint(ctx context.Context) (uint64, error)
	// Groups counts the tenants matching a filter by the values of one
	// field.
	Groups(ctx context.Context, q GroupQuery) (GroupPage, error)
}

// DeadlineStore is a view that keeps deadlines (see TenantView.Deadline):
// it sets and clears them in the transaction of each change, and the
// projector drives the rest.
type DeadlineStore interface {
	// ExpireDeadlines marks stuck up to limit tenants whose deadline has
	// passed and is at or before upTo (the zero time: no bound but the
	// clock), in one transaction; it returns their changes (of kind
	// ChangeStuck) and whether more such deadlines are due.
	ExpireDeadlines(ctx context.Context, upTo time.Time, limit int) (ApplyResult, bool, error)
	// RecomputeDeadlines gives every tenant that is neither terminal nor
	// stuck the deadline of the current SLOs, in bounded transactions.
	RecomputeDeadlines(ctx context.Context) (int, error)
	// NextDeadline returns the first deadline (zero for none) and whether
	// RecomputeDeadlines is due.
	NextDeadline() (time.Time, bool)
	// DeadlinesChanged receives when NextDeadline's answer may have
	// changed.
	DeadlinesChanged() <-chan struct{}
}
