package substate

import (
	"context"
	"time"
)

// ActionRequeue maps dead letters' raw messages again, as the console's
// requeue does one at a time: an action of a fleet job only, on members
// that are dead letters rather than executions.
const ActionRequeue ExecutionAction = "requeue"

// ParseJobAction returns the action of a fleet job named s: retry, stop,
// restart or requeue.
func ParseJobAction(s string) (ExecutionAction, error) {
	if a := ExecutionAction(s); a == ActionRequeue {
		return a, nil
	}
	if a, err := ParseExecutionAction(s); err == nil {
		return a, nil
	}
	return "", Errorf(EINVALID, "unknown action %s (want retry, stop, restart or requeue)", QuotePrefix(s, QuoteLimit))
}

// MaxJobMembers bounds the set of one job: a filter that matches more is
// refused with a request to narrow it, never cut.
const MaxJobMembers = 100_000

// JobState is where a fleet job is in its life.
type JobState string

// The states of a job. A job is queued until a worker takes it, runs
// until every member has an outcome, and may be paused, resumed and
// cancelled on the way; done and cancelled are final.
const (
	JobQueued     JobState = "queued"
	JobRunning    JobState = "running"
	JobPaused     JobState = "paused"
	JobCancelling JobState = "cancelling"
	JobCancelled  JobState = "cancelled"
	JobDone       JobState = "done"
)

// Final reports whether the job has ended.
func (s JobState) Final() bool { return s == JobDone || s == JobCancelled }

// JobOp is what an operator asks of a running job.
type JobOp string

// The operations on a job.
const (
	JobPause  JobOp = "pause"
	JobResume JobOp = "resume"
	JobCancel JobOp = "cancel"
)

// ParseJobOp returns the operation named s.
func ParseJobOp(s string) (JobOp, error) {
	switch op := JobOp(s); op {
	case JobPause, JobResume, JobCancel:
		return op, nil
	}
	return "", Errorf(ENOTFOUND, "unknown job operation %s (want pause, resume or cancel)", QuotePrefix(s, QuoteLimit))
}

// JobRequest asks for a fleet job: one action on every tenant (or dead
// letter) a filter matches, frozen when the job is created.
type JobRequest struct {
	Action ExecutionAction `json:"action"`
	// Filter selects the members, by the names GET /v1/tenants takes
	// (subState, fingerprint, provider, …), or for requeue the dead-letter
	// filter (stage, reason, tenantPrefix, since, until).
	Filter map[string]string `json:"filter"`
	Reason string            `json:"reason"`
	// Kill makes a stop of Restate invocations a kill.
	Kill bool `json:"kill,omitempty"`
	// DryRun previews the job (JobPreview) and changes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// ExpectedCount, when set, is the size of the set the caller
	// previewed: a job whose frozen set has another size is not created
	// (ECONFLICT), so what runs is what was confirmed.
	ExpectedCount *int `json:"expectedCount,omitempty"`
	// Who asks, and the tenant prefix their key is limited to; set by the
	// server from the caller's key, never by the body.
	Who   string `json:"-"`
	Scope string `json:"-"`
	// Tenants and DeadLetters are Filter parsed (the server parses it and
	// names a field it cannot read), already narrowed to Scope.
	Tenants     TenantFilter     `json:"-"`
	DeadLetters DeadLetterFilter `json:"-"`
}

// JobMember is one member of a job's frozen set: a tenant's execution as
// the view showed it when the job was created, or a dead letter.
type JobMember struct {
	TenantID      string   `json:"tenantId"`
	Provider      Provider `json:"provider,omitempty"`
	ExecutionID   string   `json:"executionId,omitempty"`
	SubState      SubState `json:"subState,omitempty"`
	ProviderState string   `json:"providerState,omitempty"`
	// Since is when the tenant entered its sub-state (for a failed Step
	// Functions execution, about when it stopped: the redrive window).
	Since time.Time `json:"since,omitzero"`
	// DeadLetter and RawSeq are a requeue member's SUBSTATE_DLQ sequence
	// and the SUBSTATE_RAW sequence of the message it holds.
	DeadLetter uint64 `json:"deadLetter,omitempty"`
	RawSeq     uint64 `json:"rawSeq,omitempty"`
}

// Lane is the name of the rate-limited lane that acts on the member: its
// provider, or "deadletters" for a requeue.
func (m JobMember) Lane() string {
	if m.DeadLetter != 0 {
		return LaneDeadLetters
	}
	return string(m.Provider)
}

// State is the member's provider state, else its sub-state: how a
// refusal names where the execution is.
func (m JobMember) State() string {
	if m.ProviderState != "" {
		return m.ProviderState
	}
	return string(m.SubState)
}

// LaneDeadLetters is the lane of requeue members.
const LaneDeadLetters = "deadletters"

// Job is a fleet job as the API shows it.
type Job struct {
	ID     string            `json:"id"`
	Action ExecutionAction   `json:"action"`
	Filter map[string]string `json:"filter"`
	Reason string            `json:"reason,omitempty"`
	Kill   bool              `json:"kill,omitempty"`
	Who    string            `json:"who"`
	// Scope is the tenant prefix of the key that created the job: its
	// filter was narrowed to it, and only keys within it see the job.
	Scope     string    `json:"tenantScope,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Position is the view position (SUBSTATE_EVENTS sequence applied;
	// for requeue, the SUBSTATE_DLQ sequence) the set was frozen at.
	Position uint64 `json:"viewPosition"`
	Total    int    `json:"total"`
	// Lanes counts the members per lane (provider, or deadletters).
	Lanes    map[string]int `json:"lanes"`
	State    JobState       `json:"state"`
	Progress JobProgress    `json:"progress"`
	// Reasons are the most frequent reasons of the members refused,
	// unknown, skipped or pending, with counts.
	Reasons []JobReason `json:"reasons,omitempty"`
}

// JobProgress counts a job's members by outcome, as SUBSTATE_AUDIT holds
// them, with the rate of the last minute and the time left at that rate.
type JobProgress struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Pending int `json:"pending"`
	Refused int `json:"refused"`
	Unknown int `json:"unknown"`
	Skipped int `json:"skipped"`
	// Remaining members have no outcome yet; a cancelled job leaves them
	// not acted on.
	Remaining int `json:"remaining"`
	// Rate is members given an outcome per second over the last minute.
	Rate       float64   `json:"ratePerSecond"`
	ETASeconds float64   `json:"etaSeconds,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
	EndedAt    time.Time `json:"endedAt,omitzero"`
	// Waiting says why the job does not advance, when it waits: a
	// provider backing off after throttling, a lease another job holds.
	Waiting string `json:"waiting,omitempty"`
}

// Outcomes returns how many members have an outcome.
func (p JobProgress) Outcomes() int { return p.Done + p.Pending + p.Refused + p.Unknown + p.Skipped }

// JobReason is one reason members were (or would be) refused, skipped,
// left unknown or pending, with how many and one of them.
type JobReason struct {
	Outcome        string `json:"outcome"`
	Lane           string `json:"lane"`
	Reason         string `json:"reason"`
	Count          int    `json:"count"`
	SampleTenantID string `json:"sampleTenantId,omitempty"`
}

// JobPreview is a dry run's answer: the set a job would act on from the
// view as it is now, exactly, and what acting on it would cost.
type JobPreview struct {
	Action   ExecutionAction   `json:"action"`
	Filter   map[string]string `json:"filter"`
	Scope    string            `json:"tenantScope,omitempty"`
	Position uint64            `json:"viewPosition"`
	Total    int               `json:"total"`
	// WouldAct is the members the action would be asked of; the others
	// would be refused (Reasons says why).
	WouldAct int           `json:"wouldAct"`
	Lanes    []LanePreview `json:"lanes"`
	Sample   []JobMember   `json:"sample"`
	Reasons  []JobReason   `json:"reasons"`
	// Seconds is how long the job would take under every lane's limits
	// (lanes run side by side).
	Seconds float64 `json:"estimatedSeconds"`
	// Notes say what the preview could not check (a permission check that
	// failed to run).
	Notes []string `json:"notes,omitempty"`
}

// LanePreview is one lane (provider) of a dry run: its members, what it
// would cost in provider API calls and how long that takes under its
// limits.
type LanePreview struct {
	Lane        string     `json:"lane"`
	Members     int        `json:"members"`
	WouldAct    int        `json:"wouldAct"`
	WouldRefuse int        `json:"wouldRefuse"`
	Calls       []APICalls `json:"calls"`
	Seconds     float64    `json:"estimatedSeconds"`
	Concurrency int        `json:"concurrency"`
}

// APICalls is how many calls of one provider API a job would make, and
// the token bucket it is limited by.
type APICalls struct {
	API    string  `json:"api"`
	Calls  int     `json:"calls"`
	Bucket int     `json:"bucket"`
	Rate   float64 `json:"ratePerSecond"`
}

// MemberOutcome is a member's outcome in a job's report: its last audit
// event under the job.
type MemberOutcome struct {
	Member int `json:"member"` // 1-based position in the frozen set
	JobMember
	Outcome        string    `json:"outcome"`
	NewExecutionID string    `json:"newExecutionId,omitempty"`
	ErrorCode      string    `json:"errorCode,omitempty"`
	Error          string    `json:"error,omitempty"`
	Detail         string    `json:"detail,omitempty"`
	AuditID        string    `json:"auditId"`
	At             time.Time `json:"at"`
}

// JobReportQuery pages through a job's report: the members after the
// member After (0: from the first), Limit of them, only those with Outcome
// when it is set.
type JobReportQuery struct {
	After   int
	Limit   int
	Outcome string
}

// JobReport is one page of a job's member outcomes, in member order.
type JobReport struct {
	Job     Job             `json:"job"`
	Members []MemberOutcome `json:"members"`
	// NextAfter, when not 0, is the After of the next page.
	NextAfter int `json:"nextAfter,omitempty"`
}

// JobService creates, runs and reports fleet jobs.
type JobService interface {
	// Preview answers a dry run: the exact set and its cost.
	Preview(ctx context.Context, req JobRequest) (JobPreview, error)
	// Create freezes the set and stores the job durably; a worker runs it.
	Create(ctx context.Context, req JobRequest) (Job, error)
	// Job returns one job with its progress, ENOTFOUND when unknown.
	Job(ctx context.Context, id string) (Job, error)
	// Jobs returns the jobs, newest first, at most limit.
	Jobs(ctx context.Context, limit int) ([]Job, error)
	// Control pauses, resumes or cancels a job.
	Control(ctx context.Context, id string, op JobOp, who string) (Job, error)
	// Report returns a page of the job's member outcomes.
	Report(ctx context.Context, id string, q JobReportQuery) (JobReport, error)
}

// idempotencyKey is the context key of WithIdempotencyKey.
type idempotencyKey struct{}

// WithIdempotencyKey returns ctx carrying the idempotency key of the
// action about to be asked of a provider: an operator that honors it
// (IdempotentOperator) makes the same key act once, however often the
// call is repeated (Step Functions' redrive client token, a restart's
// execution name).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// IdempotencyKey returns the key WithIdempotencyKey put in ctx, or "".
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// IdempotentOperator is an ExecutionOperator that honors the context's
// idempotency key for some actions: asking again with the same key does
// not act again.
type IdempotentOperator interface {
	ExecutionOperator
	// Idempotent reports whether the operator honors the key for action.
	Idempotent(action ExecutionAction) bool
}

// Selection is the set of tenants a filter matched at one view position:
// every one of them, read in one read transaction of the view.
type Selection struct {
	// Position is the view's applied SUBSTATE_EVENTS sequence the set is
	// of.
	Position uint64
	Tenants  []TenantView
}

// DeadLetterFilter selects the dead letters a requeue job acts on: those
// of a stage, whose reason contains Reason, whose payload names a tenant
// starting with TenantPrefix, stored in [Since, Until]. Zero fields select
// all.
type DeadLetterFilter struct {
	Stage        string
	Reason       string
	TenantPrefix string
	Since, Until time.Time
}

// backoffKey is the context key of WithCallerBackoff.
type backoffKey struct{}

// WithCallerBackoff returns ctx saying that its caller backs off a
// throttled provider call itself (a fleet job's lane does, for every call
// of the lane): an operator then returns ETHROTTLED at once, without
// retrying on its own.
func WithCallerBackoff(ctx context.Context) context.Context {
	return context.WithValue(ctx, backoffKey{}, true)
}

// CallerBacksOff reports whether WithCallerBackoff marked ctx.
func CallerBacksOff(ctx context.Context) bool {
	v, _ := ctx.Value(backoffKey{}).(bool)
	return v
}
