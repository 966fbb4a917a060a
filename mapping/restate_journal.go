package mapping

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// restateJournal is what the poller attaches to a row whose sys_invocation
// columns do not tell its failures: a paused row, and a row of an
// invocation that was paused and resumed (Restate's retry_count starts
// again at 1 after a resume). It holds the invocation's TransientError and
// Paused rows of sys_journal_events, oldest first, as the admin API
// returns them (at most the newest few), how many such events the journal
// holds when the list was cut, and the retry policy of the invocation's
// handler as the admin API's /services/{service} reports it.
type restateJournal struct {
	JournalEvents     []restateJournalEvent `json:"sys_journal_events"`
	JournalEventCount *int                  `json:"sys_journal_events_count"`
	RetryPolicy       *restateRetryPolicy   `json:"handler_retry_policy"`
}

// restateJournalEvent is one sys_journal_events row.
type restateJournalEvent struct {
	AppendedAt restateTime `json:"appended_at"`
	EventType  string      `json:"event_type"`
	EventJSON  string      `json:"event_json"`
}

// restateRetryPolicy is the effective retry policy of a handler: how many
// attempts (the first included) it gets, and what happens after the last
// one ("Pause" or "Kill").
type restateRetryPolicy struct {
	MaxAttempts   *int   `json:"max_attempts"`
	OnMaxAttempts string `json:"on_max_attempts"`
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

// until drops the events appended after t. The journal is read after the
// row, so it may already hold the next pause of an invocation whose row
// still shows it running; a row's own events are never later than its
// modified_at (Restate stamps a pause's row and its Paused event alike).
func (j *restateJournal) until(t time.Time) {
	kept := j.JournalEvents[:0:0]
	for _, e := range j.JournalEvents {
		if !e.AppendedAt.After(t) {
			kept = append(kept, e)
		}
	}
	if dropped := len(j.JournalEvents) - len(kept); dropped > 0 && j.JournalEventCount != nil {
		n := max(*j.JournalEventCount-dropped, 0)
		j.JournalEventCount = &n
	}
	j.JournalEvents = kept
}

// sorted returns the journal events oldest first.
func (j *restateJournal) sorted() []restateJournalEvent {
	events := slices.Clone(j.JournalEvents)
	slices.SortStableFunc(events, func(a, b restateJournalEvent) int {
		return cmp.Compare(a.AppendedAt.UnixMilli(), b.AppendedAt.UnixMilli())
	})
	return events
}

// spells splits the journal at its Paused events: the TransientError
// events of each spell a pause ended, and those after the last pause.
func (j *restateJournal) spells() (paused []int, open int) {
	for _, e := range j.sorted() {
		switch e.EventType {
		case "TransientError":
			open++
		case "Paused":
			paused = append(paused, open)
			open = 0
		}
	}
	return paused, open
}

// pausedAttempts is how many attempts a spell that its retry policy paused
// made, given the TransientError events it recorded. Restate records a
// TransientError only when the failure differs from the one before, and
// the failure of the attempt that pauses it only in the Paused event, so
// the events give a lower bound, events+1; the policy's max_attempts is
// the count itself when the policy pauses.
func (j *restateJournal) pausedAttempts(transientErrors int) int {
	n := transientErrors + 1
	if p := j.RetryPolicy; p != nil && p.MaxAttempts != nil && strings.EqualFold(p.OnMaxAttempts, "pause") {
		n = max(n, *p.MaxAttempts)
	}
	return n
}

// failedBefore is how many attempts failed in the spells that a pause
// ended, before the spell the row is in, and the TransientError events of
// the row's own spell: the last paused one when the row itself is paused,
// else those since the last pause.
func (j *restateJournal) failedBefore(rowPaused bool) (before, lastSpell int) {
	paused, open := j.spells()
	lastSpell = open
	if rowPaused && len(paused) > 0 {
		lastSpell += paused[len(paused)-1]
		paused = paused[:len(paused)-1]
	}
	for _, te := range paused {
		before += j.pausedAttempts(te)
	}
	if j.JournalEventCount != nil {
		before += max(*j.JournalEventCount-len(j.JournalEvents), 0) // cut events: at least one attempt each
	}
	return before, lastSpell
}

// endedAttempts is how many failed attempts of the last spell of a
// completed invocation were followed by a retry: each TransientError
// event of the spell is one, and the attempt that ended it (its failure is
// the completion failure) had none. When the handler's retry policy kills
// and the completion failure repeats the spell's last TransientError,
// the attempts failed alike until the policy killed the invocation
// (Restate journals one TransientError for failures alike): max_attempts
// attempts, all but the last retried.
func (j *restateJournal) endedAttempts(transientErrors int, completion string) int {
	p := j.RetryPolicy
	if p == nil || p.MaxAttempts == nil || !strings.EqualFold(p.OnMaxAttempts, "kill") || transientErrors == 0 {
		return transientErrors
	}
	if _, last := j.lastTransient(); last != "" && last == completion {
		return max(transientErrors, *p.MaxAttempts-1)
	}
	return transientErrors
}

// lastTransient returns the code and message of the newest TransientError.
func (j *restateJournal) lastTransient() (code, message string) {
	events := j.sorted()
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].EventType == "TransientError" {
			return failureOf(events[i])
		}
	}
	return "", ""
}

// failureOf returns the code and message of a TransientError or Paused
// event: Restate's documentation code (RT0007) when it gives one, else the
// error code; "" when the event carries no message.
func failureOf(ev restateJournalEvent) (code, message string) {
	var e restateErrorEvent
	if decode([]byte(ev.EventJSON), &e) != nil {
		return "", ""
	}
	if e.LastFailure != nil {
		e = *e.LastFailure
	}
	if e.Message == "" {
		return "", ""
	}
	code = e.DocCode
	if code == "" && e.Code != 0 {
		code = strconv.Itoa(e.Code)
	}
	return code, firstLine(e.Message)
}

// lastFailure returns the code and message of the newest failure in the
// journal: Restate's documentation code (RT0007) when it gives one, else
// the error code.
func (j *restateJournal) lastFailure() (code, message string) {
	events := j.sorted()
	for i := len(events) - 1; i >= 0; i-- {
		if code, message = failureOf(events[i]); message != "" {
			return code, message
		}
	}
	return "", ""
}
