package mapping

import (
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping/sfnhistory"
)

// HistoryEvent is one Step Functions history event as GetExecutionHistory
// returns it; only the fields the analysis reads are declared.
type HistoryEvent = sfnhistory.Event

// FailureDetails are the error and cause of a failure history event.
type FailureDetails = sfnhistory.FailureDetails

// HistorySummary is what the history events up to one event say about an
// execution; a poll carries the summary of the events it did not read again.
type HistorySummary = sfnhistory.Summary

// History is what an execution history says about the execution.
type History struct {
	// RetryCount counts the failed task attempts followed by, or waiting
	// for, a retry, over every page and every redrive of the execution: a
	// *Scheduled that follows a task failure is one, and so is the newest
	// failure while its Retry interval runs.
	RetryCount int `json:"retryCount"`
	// BackingOff is true when the newest task failure has no newer
	// *Scheduled and nothing continues from it: a Retry interval is running.
	BackingOff bool `json:"backingOff"`
	// LastError and LastCause are of the newest failure event since the last
	// redrive; LastCause is the human message (see the errorMessage rule of
	// the mapping).
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
	return historyOf(HistorySummary{}.Fold(events))
}

// historyOf is the History a summary describes.
func historyOf(s HistorySummary) History {
	h := History{
		RetryCount: s.RetryCount(), BackingOff: s.BackingOff(),
		LastError: s.LastError, LastFailureAt: s.LastFailureAt,
		NewestEventID: s.ThroughEventID, NewestAt: s.NewestAt, Events: s.Events,
	}
	if s.LastError != "" || s.LastCause != "" {
		h.LastCause = sfnErrorMessage(s.LastError, s.LastCause)
	}
	return h
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
