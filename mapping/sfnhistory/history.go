// Package sfnhistory folds AWS Step Functions execution history events into
// a Summary: the retries of the execution, whether it is backing off, and
// its latest failure. The Step Functions poller folds the events it has
// read into a Summary, so each poll reads only the events that are new; the
// mapping folds the events of a poll onto the Summary the poll carries.
package sfnhistory

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Event is one history event as GetExecutionHistory returns it
// (awsJson1_0); only the fields the fold reads are declared.
type Event struct {
	ID              int64        `json:"id"`
	PreviousEventID int64        `json:"previousEventId"`
	Type            string       `json:"type"`
	Timestamp       EpochSeconds `json:"timestamp"`

	StateEntered *StateDetails `json:"stateEnteredEventDetails,omitempty"`

	TaskFailed             *FailureDetails `json:"taskFailedEventDetails,omitempty"`
	TaskTimedOut           *FailureDetails `json:"taskTimedOutEventDetails,omitempty"`
	TaskStartFailed        *FailureDetails `json:"taskStartFailedEventDetails,omitempty"`
	TaskSubmitFailed       *FailureDetails `json:"taskSubmitFailedEventDetails,omitempty"`
	ActivityFailed         *FailureDetails `json:"activityFailedEventDetails,omitempty"`
	ActivityTimedOut       *FailureDetails `json:"activityTimedOutEventDetails,omitempty"`
	ActivityScheduleFailed *FailureDetails `json:"activityScheduleFailedEventDetails,omitempty"`
	LambdaFailed           *FailureDetails `json:"lambdaFunctionFailedEventDetails,omitempty"`
	LambdaTimedOut         *FailureDetails `json:"lambdaFunctionTimedOutEventDetails,omitempty"`
	LambdaStartFailed      *FailureDetails `json:"lambdaFunctionStartFailedEventDetails,omitempty"`
	LambdaScheduleFailed   *FailureDetails `json:"lambdaFunctionScheduleFailedEventDetails,omitempty"`
	ExecutionFailed        *FailureDetails `json:"executionFailedEventDetails,omitempty"`
	ExecutionTimedOut      *FailureDetails `json:"executionTimedOutEventDetails,omitempty"`
	ExecutionAborted       *FailureDetails `json:"executionAbortedEventDetails,omitempty"`
	EvaluationFailed       *FailureDetails `json:"evaluationFailedEventDetails,omitempty"`
	MapRunFailed           *FailureDetails `json:"mapRunFailedEventDetails,omitempty"`
}

// Failure returns the event's failure details, or nil.
func (e *Event) Failure() *FailureDetails {
	for _, d := range [...]*FailureDetails{
		e.TaskFailed, e.TaskTimedOut, e.TaskStartFailed, e.TaskSubmitFailed,
		e.ActivityFailed, e.ActivityTimedOut, e.ActivityScheduleFailed,
		e.LambdaFailed, e.LambdaTimedOut, e.LambdaStartFailed, e.LambdaScheduleFailed,
		e.ExecutionFailed, e.ExecutionTimedOut, e.ExecutionAborted, e.EvaluationFailed, e.MapRunFailed,
	} {
		if d != nil {
			return d
		}
	}
	return nil
}

// StateDetails are the details of a *StateEntered event.
type StateDetails struct {
	Name string `json:"name"`
}

// FailureDetails are the error and cause of a failure history event.
type FailureDetails struct {
	Error string `json:"error"`
	Cause string `json:"cause"`
}

// maxOpenFailures bounds the task failures a Summary remembers while it
// waits for the retries that name them (parallel branches can fail at once).
const maxOpenFailures = 64

// Summary is what the history, up to and including ThroughEventID, says
// about an execution. The zero Summary is that of an empty history.
type Summary struct {
	// ThroughEventID and NewestAt are of the newest event folded.
	ThroughEventID int64     `json:"throughEventId"`
	NewestAt       time.Time `json:"newestAt,omitzero"`
	// Events is the number of events folded.
	Events int `json:"events"`
	// Retries counts the task failures followed by a retry, over the whole
	// execution, redrives included: by the state's Retry (a *Scheduled
	// naming the failure, or right after it), or by entering the Task
	// state again after a Catch took the failure (a polling loop).
	Retries int `json:"retries"`
	// OpenFailures are the newest task failures no retry followed yet.
	OpenFailures []int64 `json:"openFailures,omitempty"`
	// TipFailure is the newest task failure when nothing continued from
	// it yet (no *Scheduled, no event naming it, no Execution* event): a
	// Retry interval is running. 0 otherwise.
	TipFailure int64 `json:"tipFailure,omitempty"`
	// TipIsTaskFailure is true when the newest event is a task failure.
	TipIsTaskFailure bool `json:"tipIsTaskFailure,omitempty"`
	// LastError, LastCause and LastFailureAt are of the newest failure
	// event since the last redrive.
	LastError     string    `json:"lastError,omitempty"`
	LastCause     string    `json:"lastCause,omitempty"`
	LastFailureAt time.Time `json:"lastFailureAt,omitzero"`
	// Chains are the open lines of events by their newest event id (see
	// Chain): which Task state each is in, and which Task states' caught
	// failures a new visit would retry.
	Chains map[int64]*Chain `json:"chains,omitempty"`
}

// BackingOff reports whether a Retry interval is running: the newest task
// failure has nothing after it yet.
func (s *Summary) BackingOff() bool { return s.TipFailure != 0 }

// RetryCount is the number of failed task attempts followed by, or waiting
// for, a retry: the retries so far, and one more while backing off.
func (s *Summary) RetryCount() int {
	if s.BackingOff() {
		return s.Retries + 1
	}
	return s.Retries
}

// Fold returns s moved forward by events, given in any order (several
// pages, overlapping, newest first or oldest first). Events at or before
// ThroughEventID are already in s and are skipped; duplicates count once.
// events is sorted in place.
func (s Summary) Fold(events []Event) Summary {
	slices.SortFunc(events, func(a, b Event) int { return cmp.Compare(a.ID, b.ID) })
	events = slices.CompactFunc(events, func(a, b Event) bool { return a.ID == b.ID })
	s.OpenFailures = slices.Clone(s.OpenFailures)
	s.Chains = cloneChains(s.Chains)
	for i := range events {
		if events[i].ID > s.ThroughEventID {
			s.add(&events[i])
		}
	}
	if len(s.Chains) == 0 {
		s.Chains = nil
	}
	return s
}

// add folds one event newer than every event folded so far.
func (s *Summary) add(e *Event) {
	if e.Type == "ExecutionRedriven" {
		s.LastError, s.LastCause, s.LastFailureAt = "", "", time.Time{}
		s.OpenFailures, s.TipFailure = nil, 0
		s.forgetCaught()
	}
	if d := e.Failure(); d != nil {
		s.LastError, s.LastCause, s.LastFailureAt = d.Error, d.Cause, e.Timestamp.Time
	}
	if s.TipFailure != 0 && (isTaskScheduled(e.Type) || e.PreviousEventID == s.TipFailure || strings.HasPrefix(e.Type, "Execution")) {
		s.TipFailure = 0
	}
	switch {
	case IsTaskFailure(e.Type):
		s.OpenFailures = append(s.OpenFailures, e.ID)
		if len(s.OpenFailures) > maxOpenFailures {
			s.OpenFailures = s.OpenFailures[1:]
		}
		s.TipFailure = e.ID
	case isTaskScheduled(e.Type):
		s.retried(e)
	}
	s.follow(e)
	s.TipIsTaskFailure = IsTaskFailure(e.Type)
	s.ThroughEventID, s.NewestAt = e.ID, e.Timestamp.Time
	s.Events++
}

// retried counts a *Scheduled event as a retry when it follows a task
// failure: it names one, or names none right after one.
func (s *Summary) retried(e *Event) {
	i := slices.Index(s.OpenFailures, e.PreviousEventID)
	if i < 0 && e.PreviousEventID == 0 && s.TipIsTaskFailure && len(s.OpenFailures) > 0 {
		i = len(s.OpenFailures) - 1
	}
	if i < 0 {
		return
	}
	s.Retries++
	s.OpenFailures = slices.Delete(s.OpenFailures, i, i+1)
}

// taskPrefixes are the event type prefixes of work a Retry can repeat.
var taskPrefixes = [...]string{"Task", "Activity", "LambdaFunction"}

func isTaskEvent(typ string) bool {
	for _, p := range taskPrefixes {
		if strings.HasPrefix(typ, p) && !strings.HasPrefix(typ, "TaskState") {
			return true
		}
	}
	return false
}

// IsTaskFailure reports a task *Failed or *TimedOut event (TaskFailed,
// TaskStartFailed, ActivityTimedOut, LambdaFunctionScheduleFailed, …).
func IsTaskFailure(typ string) bool {
	return isTaskEvent(typ) && (strings.HasSuffix(typ, "Failed") || strings.HasSuffix(typ, "TimedOut"))
}

func isTaskScheduled(typ string) bool {
	return isTaskEvent(typ) && strings.HasSuffix(typ, "Scheduled")
}
