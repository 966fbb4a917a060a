package actions

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Selector selects tenants at one view position (state.DB.Select).
type Selector interface {
	Select(ctx context.Context, f substate.TenantFilter, max int) (substate.Selection, error)
}

// Preflight says what a lane's provider would refuse every member of a
// job for before any member is acted on (the IAM permissions Step
// Functions' credentials lack), or "".
type Preflight func(ctx context.Context, action substate.ExecutionAction) (string, error)

// Limits of the job service.
const (
	// MaxReasonBytes bounds a job's reason.
	MaxReasonBytes = 4096
	// sampleSize is how many members a dry run shows.
	sampleSize = 20
	// maxReasons is how many reasons a job or a dry run lists.
	maxReasons = 20
	// maxTallies is how many jobs' tallies a Service keeps in memory.
	maxTallies = 64
	// maxEnded is how many ended jobs a Service keeps as the API shows
	// them: an ended job no longer changes, so a list of them is not
	// folded from SUBSTATE_AUDIT again (a list holds at most 500).
	maxEnded = 512
	// waitingNoteTime is how long a runner's note of why a job waits
	// holds; it notes it again at most every waitingNoteEvery.
	waitingNoteTime  = 30 * time.Second
	waitingNoteEvery = 5 * time.Second
)

// Service is a worker's substate.JobService: it previews and creates jobs,
// reads their progress and reports from SUBSTATE_AUDIT, and records the
// operators' controls. A Runner runs the jobs. Set the fields before
// use; JS and Views are required.
type Service struct {
	JS    jetstream.JetStream
	Views Selector
	// Lanes are the lanes this worker can act in (the providers it has an
	// operator for, and deadletters when it can requeue): a member of
	// another is refused.
	Lanes []string
	// Rules are the providers' rules (providers/…): what their API calls
	// cost and the retries they refuse, for a dry run.
	Rules map[substate.Provider]substate.ProviderRules
	// Limits are each lane's limits, for a dry run's estimate; nil means
	// DefaultLimits(Rules).
	Limits map[string]Limits
	// Preflight checks each lane's permissions for a dry run.
	Preflight map[string]Preflight
	Now       func() time.Time
	Logger    *slog.Logger

	once    sync.Once
	store   *store
	mu      sync.Mutex
	tallies map[string]*tally
	order   []string // tallies' jobs, oldest use first
	ended   map[string]substate.Job
	endedAt []string // ended's jobs, oldest first
}

var _ substate.JobService = (*Service)(nil)

func (s *Service) init() {
	s.once.Do(func() {
		s.store = newStore(s.JS)
		s.tallies, s.ended = map[string]*tally{}, map[string]substate.Job{}
		if s.Limits == nil {
			s.Limits = DefaultLimits(s.Rules)
		}
	})
}

// Create freezes the set the request selects (one view position, or the
// dead-letter stream as it is), stores the job on SUBSTATE_ACTIONS and
// returns it queued: a worker's Runner takes it from there. A filter that
// matches nothing, or a set of another size than ExpectedCount, creates
// no job (ECONFLICT).
func (s *Service) Create(ctx context.Context, req substate.JobRequest) (substate.Job, error) {
	s.init()
	if err := checkRequest(req); err != nil {
		return substate.Job{}, err
	}
	members, pos, err := s.freeze(ctx, req)
	if err != nil {
		return substate.Job{}, err
	}
	switch {
	case len(members) == 0:
		return substate.Job{}, substate.Errorf(substate.ECONFLICT, "the filter matches nothing (at view position %d): no job was created", pos)
	case req.ExpectedCount != nil && *req.ExpectedCount != len(members):
		return substate.Job{}, substate.Errorf(substate.ECONFLICT,
			"the filter now matches %d, not the %d previewed (the view moved on to position %d): no job was created; preview again", len(members), *req.ExpectedCount, pos)
	}
	rec := record{
		ID: newJobID(s.now()), Action: req.Action, Filter: req.Filter, Reason: req.Reason, Kill: req.Kill, Who: req.Who,
		Scope: req.Scope, CreatedAt: s.now(), Position: pos, Total: len(members), Lanes: lanes(members),
		Chunks: (len(members) + chunkSize - 1) / chunkSize,
	}
	if err := s.store.create(ctx, rec, members); err != nil {
		return substate.Job{}, err
	}
	s.logger().Info("fleet job created", "job", rec.ID, "action", rec.Action, "members", rec.Total, "who", rec.Who, "reason", rec.Reason, "view_position", pos)
	return jobOf(rec, substate.JobQueued, substate.JobProgress{Total: rec.Total, Remaining: rec.Total}, nil), nil
}

// checkRequest bounds what the caller sent.
func checkRequest(req substate.JobRequest) error {
	if _, err := substate.ParseJobAction(string(req.Action)); err != nil {
		return err
	}
	switch {
	case len(req.Reason) > MaxReasonBytes || !utf8.ValidString(req.Reason):
		return substate.Errorf(substate.EINVALID, "the reason must be UTF-8 text of at most %d bytes", MaxReasonBytes)
	case req.Kill && req.Action != substate.ActionStop:
		return substate.Errorf(substate.EINVALID, "kill applies to stop only")
	case strings.TrimSpace(req.Who) == "":
		return substate.Errorf(substate.EINVALID, "a job needs to say who creates it")
	case !strings.HasPrefix(req.Tenants.TenantPrefix, req.Scope) || !strings.HasPrefix(req.DeadLetters.TenantPrefix, req.Scope):
		return substate.Errorf(substate.EFORBIDDEN, "the filter reaches outside the key's tenants (prefix %q)", req.Scope)
	}
	return nil
}

// freeze returns the members the request selects, and the position of
// the view (or the dead-letter stream) they were read at.
func (s *Service) freeze(ctx context.Context, req substate.JobRequest) ([]substate.JobMember, uint64, error) {
	if req.Action == substate.ActionRequeue {
		return s.deadLetters(ctx, req.DeadLetters)
	}
	sel, err := s.Views.Select(ctx, req.Tenants, substate.MaxJobMembers)
	if err != nil {
		return nil, 0, err
	}
	members := make([]substate.JobMember, len(sel.Tenants))
	for i, v := range sel.Tenants {
		members[i] = memberOf(v)
	}
	return members, sel.Position, nil
}

// lanes counts members per lane.
func lanes(members []substate.JobMember) map[string]int {
	out := map[string]int{}
	for _, m := range members {
		out[m.Lane()]++
	}
	return out
}

// Job returns a job with its state and progress.
func (s *Service) Job(ctx context.Context, id string) (substate.Job, error) {
	s.init()
	rec, err := s.store.record(ctx, id)
	if err != nil {
		return substate.Job{}, err
	}
	return s.job(ctx, rec)
}

// job completes a record with its state and its tally's progress.
func (s *Service) job(ctx context.Context, rec record) (substate.Job, error) {
	s.mu.Lock()
	j, ok := s.ended[rec.ID]
	s.mu.Unlock()
	if ok {
		return j, nil
	}
	j, _, err := s.jobTally(ctx, rec)
	if err == nil && j.State.Final() {
		s.keepEnded(j)
	}
	return j, err
}

// keepEnded remembers an ended job, which no longer changes.
func (s *Service) keepEnded(j substate.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ended[j.ID]; !ok {
		s.endedAt = append(s.endedAt, j.ID)
	}
	s.ended[j.ID] = j
	for len(s.endedAt) > maxEnded {
		delete(s.ended, s.endedAt[0])
		s.endedAt = s.endedAt[1:]
	}
}

// jobTally is job, with the tally it was folded from.
func (s *Service) jobTally(ctx context.Context, rec record) (substate.Job, *tally, error) {
	state, mark, err := s.store.status(ctx, rec.ID)
	if err != nil {
		return substate.Job{}, nil, err
	}
	t, err := s.tally(ctx, rec.ID)
	if err != nil {
		return substate.Job{}, nil, err
	}
	p := t.progress(rec.Total, s.now())
	if state.Final() {
		p.EndedAt, p.Rate, p.ETASeconds = mark.At, 0, 0
	}
	if state == substate.JobRunning && s.now().Sub(mark.At) < waitingNoteTime {
		p.Waiting = mark.Waiting
	}
	return jobOf(rec, state, p, t.reasons(maxReasons)), t, nil
}

// jobOf is a job as the API shows it.
func jobOf(rec record, state substate.JobState, p substate.JobProgress, reasons []substate.JobReason) substate.Job {
	return substate.Job{
		ID: rec.ID, Action: rec.Action, Filter: rec.Filter, Reason: rec.Reason, Kill: rec.Kill, Who: rec.Who,
		Scope: rec.Scope, CreatedAt: rec.CreatedAt, Position: rec.Position, Total: rec.Total, Lanes: rec.Lanes,
		State: state, Progress: p, Reasons: reasons,
	}
}

// tally returns the job's tally, refreshed from SUBSTATE_AUDIT.
func (s *Service) tally(ctx context.Context, id string) (*tally, error) {
	s.mu.Lock()
	t := s.tallies[id]
	if t == nil {
		t = newTally(id)
		s.tallies[id] = t
	}
	s.order = append(slices.DeleteFunc(s.order, func(j string) bool { return j == id }), id)
	for len(s.order) > maxTallies {
		delete(s.tallies, s.order[0])
		s.order = s.order[1:]
	}
	s.mu.Unlock()
	return t, t.refresh(ctx, s.store.reader)
}

// Jobs returns the jobs kept, newest first, at most limit.
func (s *Service) Jobs(ctx context.Context, limit int) ([]substate.Job, error) {
	s.init()
	recs, err := s.store.jobs(ctx)
	if err != nil {
		return nil, err
	}
	slices.Reverse(recs)
	out := []substate.Job{}
	for _, rec := range recs[:min(len(recs), max(limit, 1))] {
		j, err := s.job(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// Control records an operator's pause, resume or cancel of a job; the
// worker running it acts on it within a moment. A job that ended is not
// changed (ECONFLICT).
func (s *Service) Control(ctx context.Context, id string, op substate.JobOp, who string) (substate.Job, error) {
	s.init()
	rec, err := s.store.record(ctx, id)
	if err != nil {
		return substate.Job{}, err
	}
	state, _, err := s.store.status(ctx, id)
	switch {
	case err != nil:
		return substate.Job{}, err
	case state.Final():
		return substate.Job{}, substate.Errorf(substate.ECONFLICT, "job %s is %s: there is nothing to %s", id, state, op)
	case state == substate.JobCancelling && op != substate.JobCancel:
		return substate.Job{}, substate.Errorf(substate.ECONFLICT, "job %s is being cancelled: it cannot be %sd", id, op)
	}
	if err := s.store.put(ctx, id, partControl, "", control{Op: op, Who: who, At: s.now()}); err != nil {
		return substate.Job{}, err
	}
	s.logger().Info("fleet job control", "job", id, "op", op, "who", who)
	return s.job(ctx, rec)
}

// Report returns a page of a job's member outcomes, in member order.
func (s *Service) Report(ctx context.Context, id string, q substate.JobReportQuery) (substate.JobReport, error) {
	s.init()
	rec, err := s.store.record(ctx, id)
	if err != nil {
		return substate.JobReport{}, err
	}
	j, t, err := s.jobTally(ctx, rec)
	if err != nil {
		return substate.JobReport{}, err
	}
	return reportPage(j, t.outcomes(), q), nil
}

// reportPage is one page of a job's outcomes.
func reportPage(j substate.Job, outcomes map[int]substate.AuditEvent, q substate.JobReportQuery) substate.JobReport {
	limit := q.Limit
	if limit <= 0 || limit > MaxReportPage {
		limit = min(max(limit, DefaultReportPage), MaxReportPage)
	}
	rep := substate.JobReport{Job: j, Members: []substate.MemberOutcome{}}
	for _, n := range slices.Sorted(maps.Keys(outcomes)) {
		ev := outcomes[n]
		if n <= q.After || (q.Outcome != "" && ev.Outcome != q.Outcome) {
			continue
		}
		if len(rep.Members) == limit {
			rep.NextAfter = rep.Members[limit-1].Member
			break
		}
		rep.Members = append(rep.Members, outcomeOf(n, ev))
	}
	return rep
}

// Page sizes of a job's report.
const (
	DefaultReportPage = 1000
	MaxReportPage     = 10000
)

// outcomeOf is a member's outcome as its last audit event records it.
func outcomeOf(n int, ev substate.AuditEvent) substate.MemberOutcome {
	return substate.MemberOutcome{
		Member: n, JobMember: substate.JobMember{TenantID: ev.TenantID, Provider: ev.Provider, ExecutionID: ev.ExecutionID, DeadLetter: ev.DeadLetter},
		Outcome: ev.Outcome, NewExecutionID: ev.NewExecutionID, ErrorCode: ev.ErrorCode, Error: ev.Error, Detail: ev.Detail,
		AuditID: ev.ID, At: ev.Time,
	}
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
