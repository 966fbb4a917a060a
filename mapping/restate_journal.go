package mapping

import (
	"cmp"
	"slices"
	"strconv"
)

// restateJournal is what the poller attaches to a paused row, whose
// sys_invocation columns say nothing of its failures: the invocation's
// TransientError and Paused rows of sys_journal_events, oldest first, as
// the admin API returns them (at most the newest few), and how many such
// events the journal holds when the list was cut.
type restateJournal struct {
	JournalEvents     []restateJournalEvent `json:"sys_journal_events"`
	JournalEventCount *int                  `json:"sys_journal_events_count"`
}

// restateJournalEvent is one sys_journal_events row.
type restateJournalEvent struct {
	AppendedAt restateTime `json:"appended_at"`
	EventType  string      `json:"event_type"`
	EventJSON  string      `json:"event_json"`
}

// restateErrorEvent is the event_json of a TransientError, or the
// last_failure of a Paused event.
type restateErrorEvent struct {
	Code        int                `json:"error_code"`
	Message     string             `json:"error_message"`
	DocCode     string             `json:"restate_doc_error_code"`
	LastFailure *restateErrorEvent `json:"last_failure"`
}

func (j *restateJournal) hasJournal() bool { return len(j.JournalEvents) > 0 }

// failures is a lower bound of the invocation's failed attempts: each
// TransientError event is one (Restate records a failure only when it
// differs from the one before), and each Paused event carries the failure
// of the attempt that paused it.
func (j *restateJournal) failures() int {
	n := 0
	for _, e := range j.JournalEvents {
		if e.EventType == "TransientError" || e.EventType == "Paused" {
			n++
		}
	}
	if j.JournalEventCount != nil {
		n = max(n, *j.JournalEventCount)
	}
	return n
}

// lastFailure returns the code and message of the newest failure in the
// journal: Restate's documentation code (RT0007) when it gives one, else
// the error code.
func (j *restateJournal) lastFailure() (code, message string) {
	events := slices.Clone(j.JournalEvents)
	slices.SortStableFunc(events, func(a, b restateJournalEvent) int {
		return cmp.Compare(a.AppendedAt.UnixMilli(), b.AppendedAt.UnixMilli())
	})
	for i := len(events) - 1; i >= 0; i-- {
		var e restateErrorEvent
		if decode([]byte(events[i].EventJSON), &e) != nil {
			continue
		}
		if e.LastFailure != nil {
			e = *e.LastFailure
		}
		if e.Message == "" {
			continue
		}
		code = e.DocCode
		if code == "" && e.Code != 0 {
			code = strconv.Itoa(e.Code)
		}
		return code, firstLine(e.Message)
	}
	return "", ""
}
