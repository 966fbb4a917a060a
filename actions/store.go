package actions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

// chunkSize is how many members one message of a frozen set holds: well
// under JetStream's 1 MiB message limit with the longest execution ids.
const chunkSize = 1000

// Parts of a job's record, the last token of its subjects.
const (
	partJob     = "job"
	partMembers = "members"
	partIntent  = "intent"
	partControl = "control"
	partState   = "state"
)

// record is a job's request and the facts of its frozen set: the message
// a worker takes the job with.
type record struct {
	ID        string                   `json:"id"`
	Action    substate.ExecutionAction `json:"action"`
	Filter    map[string]string        `json:"filter"`
	Reason    string                   `json:"reason,omitempty"`
	Kill      bool                     `json:"kill,omitempty"`
	Who       string                   `json:"who"`
	Scope     string                   `json:"tenantScope,omitempty"`
	CreatedAt time.Time                `json:"createdAt"`
	Position  uint64                   `json:"viewPosition"`
	Total     int                      `json:"total"`
	Lanes     map[string]int           `json:"lanes"`
	Chunks    int                      `json:"chunks"`
}

// intent says a job is about to ask a provider to act on a member, with
// the execution's description then.
type intent struct {
	Member int                    `json:"member"`
	Before substate.ExecutionInfo `json:"before"`
}

// control is an operator's pause, resume or cancel of a job.
type control struct {
	Op  substate.JobOp `json:"op"`
	Who string         `json:"who"`
	At  time.Time      `json:"at"`
}

// stateMark is a worker's note of where a job is: running, done or
// cancelled.
type stateMark struct {
	State  substate.JobState `json:"state"`
	Worker string            `json:"worker,omitempty"`
	At     time.Time         `json:"at"`
	// Waiting says why a running job does not advance (a lane backing
	// off after throttling), as of At.
	Waiting string `json:"waiting,omitempty"`
}

// store reads and writes jobs' records on SUBSTATE_ACTIONS.
type store struct {
	js     jetstream.JetStream
	reader *replay.Reader
}

func newStore(js jetstream.JetStream) *store {
	return &store{js: js, reader: &replay.Reader{JS: js}}
}

// jobIDPattern is what a job id looks like; anything else names no job.
var jobIDPattern = regexp.MustCompile(`^job-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$`)

// newJobID returns a job id: the time of creation, sortable, and 8 random
// hexadecimal digits.
func newJobID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "job-" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// checkJobID returns ENOTFOUND for an id no job can have.
func checkJobID(id string) error {
	if !jobIDPattern.MatchString(id) {
		return substate.Errorf(substate.ENOTFOUND, "no job %s", substate.QuotePrefix(id, substate.QuoteLimit))
	}
	return nil
}

// create stores a job: its members first, then its record, which is what
// makes it a job (and what a worker takes), so a worker never finds a
// job without its members.
func (s *store) create(ctx context.Context, rec record, members []substate.JobMember) error {
	for i := 0; i < rec.Chunks; i++ {
		part := members[i*chunkSize : min((i+1)*chunkSize, len(members))]
		if err := s.put(ctx, rec.ID, partMembers+"."+strconv.Itoa(i), rec.ID+"/members/"+strconv.Itoa(i), part); err != nil {
			return err
		}
	}
	return s.put(ctx, rec.ID, partJob, rec.ID, rec)
}

// put publishes v as JSON on a part of a job's record; id, when set, is
// its Nats-Msg-Id.
func (s *store) put(ctx context.Context, job, part, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode job %s %s: %w", job, part, err)
	}
	m := nats.NewMsg(substate.JobSubject(job, part))
	m.Data = data
	if id != "" {
		m.Header.Set(substate.HeaderMsgID, id)
	}
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return substate.WrapError(substate.EUNAVAILABLE, err, "store job %s %s", job, part)
	}
	return nil
}

// last decodes the last message of a part of a job's record into v;
// false when there is none.
func (s *store) last(ctx context.Context, job, part string, v any) (bool, error) {
	st, err := s.js.Stream(ctx, substate.StreamActions)
	if err != nil {
		return false, substate.WrapError(substate.EUNAVAILABLE, err, "read job %s", job)
	}
	m, err := st.GetLastMsgForSubject(ctx, substate.JobSubject(job, part))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, substate.WrapError(substate.EUNAVAILABLE, err, "read job %s", job)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return false, fmt.Errorf("decode job %s %s: %w", job, part, err)
	}
	return true, nil
}

// record returns a job's record, ENOTFOUND when there is no such job.
func (s *store) record(ctx context.Context, id string) (record, error) {
	var rec record
	if err := checkJobID(id); err != nil {
		return rec, err
	}
	ok, err := s.last(ctx, id, partJob, &rec)
	if err == nil && !ok {
		err = substate.Errorf(substate.ENOTFOUND, "no job %s", id)
	}
	return rec, err
}

// members returns a job's frozen set, in member order.
func (s *store) members(ctx context.Context, rec record) ([]substate.JobMember, error) {
	out := make([]substate.JobMember, 0, rec.Total)
	for i := 0; i < rec.Chunks; i++ {
		var part []substate.JobMember
		ok, err := s.last(ctx, rec.ID, partMembers+"."+strconv.Itoa(i), &part)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("job %s: part %d of its members is missing", rec.ID, i)
		}
		out = append(out, part...)
	}
	if len(out) != rec.Total {
		return nil, fmt.Errorf("job %s: %d members stored, %d recorded", rec.ID, len(out), rec.Total)
	}
	return out, nil
}

// intents returns the intents a job recorded, by member.
func (s *store) intents(ctx context.Context, job string) (map[int]substate.ExecutionInfo, error) {
	out := map[int]substate.ExecutionInfo{}
	for m, err := range s.reader.Messages(ctx, substate.StreamActions, substate.JobSubject(job, partIntent), replay.Range{}) {
		if err != nil {
			return nil, err
		}
		var in intent
		if json.Unmarshal(m.Data, &in) == nil {
			out[in.Member] = in.Before
		}
	}
	return out, nil
}

// jobs returns the records of every job kept, oldest first.
func (s *store) jobs(ctx context.Context) ([]record, error) {
	var out []record
	subject := substate.SubjectActionsPrefix + "*." + partJob
	for m, err := range s.reader.Messages(ctx, substate.StreamActions, subject, replay.Range{}) {
		if err != nil {
			return nil, err
		}
		var rec record
		if json.Unmarshal(m.Data, &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// status returns a job's state as its marks and controls say.
func (s *store) status(ctx context.Context, id string) (substate.JobState, stateMark, error) {
	var mark stateMark
	var ctl control
	marked, err := s.last(ctx, id, partState, &mark)
	if err != nil {
		return "", mark, err
	}
	controlled, err := s.last(ctx, id, partControl, &ctl)
	if err != nil {
		return "", mark, err
	}
	return stateOf(marked, mark, controlled, ctl), mark, nil
}

// stateOf is a job's state: final once a worker marked it so; otherwise
// what the last control asked (cancelling, paused), else running once a
// worker took it, else queued.
func stateOf(marked bool, mark stateMark, controlled bool, ctl control) substate.JobState {
	switch {
	case marked && mark.State.Final():
		return mark.State
	case controlled && ctl.Op == substate.JobCancel:
		return substate.JobCancelling
	case controlled && ctl.Op == substate.JobPause:
		return substate.JobPaused
	case marked:
		return substate.JobRunning
	}
	return substate.JobQueued
}
