package restate

import (
	"encoding/json"
	"fmt"
	"time"
)

// DerivedFrom is the member the poller adds to a row it derived from an
// invocation's journal rather than read from sys_invocation (see
// pausesBetween); its value names the table the row comes from.
const DerivedFrom = "substate_derived_from"

// statusColumns are the sys_invocation columns that describe an
// invocation's state at one moment: a row derived from the journal drops
// them and says its own.
var statusColumns = []string{
	"status", "modified_at", "retry_count", "last_failure", "last_failure_error_code", "next_retry_at",
	"completion_result", "completion_failure", "completed_at", "last_start_at",
	"last_attempt_deployment_id", "last_attempt_server", "sys_journal_events", "sys_journal_events_count",
	"handler_retry_policy",
}

// journalEvent is what pausesBetween reads of a sys_journal_events row.
type journalEvent struct {
	raw        json.RawMessage
	at         time.Time
	appendedAt string
	typ        string
}

// pausesBetween returns, for each pause in the journal after the newest
// row the poller published of the invocation and before the row f, a row
// as the invocation was when it paused (status paused, modified_at the
// Paused event's time, the journal until then); and, when it was resumed
// and paused again before f, a row as it was when its first attempt after
// the resume failed (backing-off, retry_count 1, at that failure's time).
// A pause and resume between two polls then still show in the tenant's
// history, at their real times, with the journal events as evidence. Each
// derived row carries DerivedFrom.
func (p *Poller) pausesBetween(row json.RawMessage, e journalEntry, f rowFacts) []json.RawMessage {
	until, err := parseRestateTime(f.ModifiedAt)
	if err != nil {
		return nil
	}
	events := decodeEvents(e.events)
	var out []json.RawMessage
	for i, ev := range events {
		if ev.typ != "Paused" || !ev.at.After(e.shown) || !ev.at.Before(until) {
			continue
		}
		out = append(out, derivedRow(row, map[string]any{"status": "paused", "modified_at": ev.appendedAt}, e.events[:i+1], e.policy))
		if j := nextFailure(events, i+1); j >= 0 && events[j].at.Before(until) && pausedAgain(events[j:], until) {
			set := map[string]any{"status": "backing-off", "modified_at": events[j].appendedAt, "retry_count": 1}
			if code, msg := failureText(events[j].raw); msg != "" {
				set["last_failure"], set["last_failure_error_code"] = msg, code
			}
			out = append(out, derivedRow(row, set, e.events[:j+1], e.policy))
		}
	}
	return out
}

// decodeEvents reads the time and type of journal events; an event whose
// time cannot be read is kept with a zero time, which no window holds.
func decodeEvents(raws []json.RawMessage) []journalEvent {
	out := make([]journalEvent, len(raws))
	for i, raw := range raws {
		var r struct {
			AppendedAt json.RawMessage `json:"appended_at"`
			Type       string          `json:"event_type"`
		}
		_ = json.Unmarshal(raw, &r)
		at := trimQuotes(r.AppendedAt)
		t, _ := parseRestateTime(at)
		out[i] = journalEvent{raw: raw, at: t, appendedAt: at, typ: r.Type}
	}
	return out
}

func trimQuotes(b json.RawMessage) string {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

// nextFailure returns the index of the first TransientError of events
// from index from on, or -1.
func nextFailure(events []journalEvent, from int) int {
	for i := from; i < len(events); i++ {
		if events[i].typ == "TransientError" {
			return i
		}
	}
	return -1
}

// pausedAgain reports whether events hold a pause before until: the
// spell the failures belong to ended before the row.
func pausedAgain(events []journalEvent, until time.Time) bool {
	for _, ev := range events {
		if ev.typ == "Paused" && ev.at.Before(until) {
			return true
		}
	}
	return false
}

// failureText returns the documentation code and message of a
// TransientError event.
func failureText(raw json.RawMessage) (code, message string) {
	var r struct {
		EventJSON string `json:"event_json"`
	}
	var ev struct {
		Code    int    `json:"error_code"`
		DocCode string `json:"restate_doc_error_code"`
		Message string `json:"error_message"`
	}
	if json.Unmarshal(raw, &r) != nil || json.Unmarshal([]byte(r.EventJSON), &ev) != nil {
		return "", ""
	}
	code = ev.DocCode
	if code == "" && ev.Code != 0 {
		code = fmt.Sprint(ev.Code)
	}
	return code, ev.Message
}

// derivedRow returns row without its status columns, with set, the journal
// events and the policy attached, and DerivedFrom.
func derivedRow(row json.RawMessage, set map[string]any, events []json.RawMessage, policy json.RawMessage) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(row, &r) != nil {
		return nil
	}
	for _, c := range statusColumns {
		delete(r, c)
	}
	for k, v := range set {
		r[k], _ = json.Marshal(v)
	}
	r[DerivedFrom], _ = json.Marshal("sys_journal_events")
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return attachFailures(b, events, policy)
}
