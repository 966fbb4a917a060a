package engine

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

// Phases of an execution: what its runner does next.
const (
	phaseEnter   = "enter"   // execute State with Data as its input
	phaseAttempt = "attempt" // run attempt Attempt of the task State
	phaseBackoff = "backoff" // sleep until Deadline, then run the next attempt
	phaseWait    = "wait"    // sleep until Deadline, then move to the Wait state's next
	phaseDone    = "done"    // finished; Status tells how
)

// record is an execution's durable state. It is written before the engine
// acts on it, so a restart resumes exactly where the execution was.
type record struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	TenantID   string          `json:"tenantId"`
	Input      json.RawMessage `json:"input"`
	Definition string          `json:"definition"` // key of the definition text
	StartedAt  time.Time       `json:"startedAt"`

	Phase   string          `json:"phase"`
	State   string          `json:"state"`
	Step    uint64          `json:"step"` // states entered so far; tells loop iterations apart
	Data    json.RawMessage `json:"data"` // the current state's input
	Attempt int             `json:"attempt,omitempty"`
	Retries int             `json:"retries,omitempty"` // retries in the whole execution so far
	// Redrives counts the times RetryExecution took the execution up
	// again: what tells a retry that failed again at once from one not
	// taken.
	Redrives int       `json:"redrives,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	// TimeoutAt is when the workflow's timeout ends the execution (zero:
	// no timeout). It is absolute, so a restart resumes with the time left.
	TimeoutAt time.Time `json:"timeoutAt,omitzero"`

	// Seq is the last emission sequence number assigned. Pending holds the
	// events assigned but not yet acknowledged by the publisher: they are
	// published (again, under the same ids) before anything else happens.
	Seq     uint64                 `json:"seq"`
	Pending []substate.EngineEvent `json:"pending,omitempty"`
	Last    substate.EngineEvent   `json:"last"`

	// Caught and CaughtData are the Task state whose error a catcher took
	// last, and that state's input: a retry of an execution that then
	// ended in a Fail state starts again there.
	Caught     string          `json:"caught,omitempty"`
	CaughtData json.RawMessage `json:"caughtData,omitempty"`
	// CaughtTasks are the Task states whose failure a catcher took and
	// that the execution has not entered since: entering one again (a
	// polling loop) is a retry of that failure.
	CaughtTasks []string `json:"caughtTasks,omitempty"`

	Status  string          `json:"status"`            // running, succeeded or failed
	Stopped bool            `json:"stopped,omitempty"` // ended by Stop
	Output  json.RawMessage `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
	Cause   string          `json:"cause,omitempty"`
	EndedAt time.Time       `json:"endedAt,omitzero"`
}

// active reports whether the record still needs its runner: it has not
// finished, or it has events to publish.
func (r *record) active() bool { return r.Phase != phaseDone || len(r.Pending) > 0 }

// clone returns a copy that can be changed without touching r.
func (r *record) clone() *record {
	c := *r
	c.Pending = append([]substate.EngineEvent(nil), r.Pending...)
	c.CaughtTasks = slices.Clone(r.CaughtTasks)
	return &c
}

// execution returns the public view of the record.
func (r *record) execution() Execution {
	return Execution{ID: r.ID, Name: r.ID, Workflow: r.Workflow, StartedAt: r.StartedAt}
}

// emit assigns the next sequence number to a new event of the record and
// queues it for publishing.
func (r *record) emit(now time.Time, status string, fill func(*substate.EngineEvent)) {
	r.Seq++
	ev := substate.EngineEvent{
		ID:          substate.EngineEventID(r.ID, r.Seq),
		TenantID:    r.TenantID,
		ExecutionID: r.ID,
		Workflow:    r.Workflow,
		Seq:         r.Seq,
		Status:      status,
		State:       r.State,
		StartedAt:   r.StartedAt,
		Time:        now,
	}
	if fill != nil {
		fill(&ev)
	}
	r.Pending = append(r.Pending, ev)
	r.Last = ev
}
