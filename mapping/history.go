package mapping

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// HistoryEvent is one Step Functions history event as GetExecutionHistory
// returns it; only the fields the analysis reads are declared.
type HistoryEvent struct {
	ID              int64        `json:"id"`
	PreviousEventID int64        `json:"previousEventId"`
	Type            string       `json:"type"`
	Timestamp       EpochSeconds `json:"timestamp"`

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

// FailureDetails are the error and cause of a failure history event.
type FailureDetails struct {
	Error string `json:"error"`
	Cause string `json:"cause"`
}

// failure returns the event's failure details, or nil.
func (e *HistoryEvent) failure() *FailureDetails {
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

// isTaskFailure reports a task *Failed or *TimedOut event (TaskFailed,
// TaskStartFailed, ActivityTimedOut, LambdaFunctionScheduleFailed, …).
func isTaskFailure(typ string) bool {
	return isTaskEvent(typ) && (strings.HasSuffix(typ, "Failed") || strings.HasSuffix(typ, "TimedOut"))
}

func isTaskScheduled(typ string) bool {
	return isTaskEvent(typ) && strings.HasSuffix(typ, "Scheduled")
}

// History is what the execution history says about the current redrive
// epoch (the events after the last ExecutionRedriven).
type History struct {
	// RetryCount counts the task retries: *Scheduled events that follow a
	// task failure.
	RetryCount int `json:"retryCount"`
	// BackingOff is true when the newest task failure has no newer
	// *Scheduled and nothing continues from it: a Retry interval is running.
	BackingOff bool `json:"backingOff"`
	// LastError and LastCause are of the newest failure event; LastCause is
	// the human message (see the errorMessage rule of the mapping).
	LastError string `json:"lastError"`
	LastCause string `json:"lastCause"`
	// LastFailureAt is the time of the newest failure event.
	LastFailureAt time.Time `json:"lastFailureAt"`
	// NewestEventID and NewestAt are of the newest event of the whole history.
	NewestEventID int64     `json:"newestEventId"`
	NewestAt      time.Time `json:"newestAt"`
	// Events is the number of events analysed.
	Events int `json:"events"`
}

// AnalyzeHistory analyses history events given in either order, possibly
// several GetExecutionHistory pages concatenated. Duplicate ids (overlapping
// pages) count once. events is sorted in place by id.
func AnalyzeHistory(events []HistoryEvent) History {
	slices.SortFunc(events, func(a, b HistoryEvent) int { return cmp.Compare(a.ID, b.ID) })
	events = slices.CompactFunc(events, func(a, b HistoryEvent) bool { return a.ID == b.ID })
	var h History
	h.Events = len(events)
	if len(events) == 0 {
		return h
	}
	newest := &events[len(events)-1]
	h.NewestEventID, h.NewestAt = newest.ID, newest.Timestamp.Time
	epoch := events
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == "ExecutionRedriven" {
			epoch = events[i+1:]
			break
		}
	}
	analyzeEpoch(epoch, &h)
	return h
}

func analyzeEpoch(events []HistoryEvent, h *History) {
	failures := make(map[int64]bool)
	lastTaskFailure := -1
	for i := range events {
		e := &events[i]
		if d := e.failure(); d != nil {
			h.LastError, h.LastCause = d.Error, sfnErrorMessage(d.Error, d.Cause)
			h.LastFailureAt = e.Timestamp.Time
		}
		switch {
		case isTaskFailure(e.Type):
			failures[e.ID] = true
			lastTaskFailure = i
		case isTaskScheduled(e.Type):
			prevFailed := failures[e.PreviousEventID] ||
				(e.PreviousEventID == 0 && i > 0 && isTaskFailure(events[i-1].Type))
			if prevFailed {
				h.RetryCount++
			}
		}
	}
	if lastTaskFailure < 0 {
		return
	}
	f := events[lastTaskFailure].ID
	for _, e := range events[lastTaskFailure+1:] {
		if isTaskScheduled(e.Type) || e.PreviousEventID == f || strings.HasPrefix(e.Type, "Execution") {
			return
		}
	}
	h.BackingOff = true
}

// ParseHistory decodes a GetExecutionHistory response body ({"events": […]})
// and analyses it.
func ParseHistory(body []byte) (History, error) {
	var page struct {
		Events []HistoryEvent `json:"events"`
	}
	if err := decode(body, &page); err != nil {
		return History{}, substate.WrapError(substate.EINVALID, err, "decode execution history")
	}
	return AnalyzeHistory(page.Events), nil
}
