package awstest

import (
	"encoding/json"
	"slices"
	"time"
)

// PutEvents limits, as EventBridge enforces them.
const (
	MaxPutEventsEntries = 10
	MaxPutEventsSize    = 256 * 1024
)

// PutEventsEntry is one event sent with PutEvents.
type PutEventsEntry struct {
	Source       string
	DetailType   string
	Detail       string
	EventBusName string
	Resources    []string
	Time         time.Time
	// EventID is the id the server gave the accepted entry.
	EventID string
}

// Size is the entry's size as EventBridge counts it against the 256 KiB
// limit: 14 bytes for a time plus the UTF-8 bytes of source, detail type,
// detail and every resource.
func (e *PutEventsEntry) Size() int {
	n := len(e.Source) + len(e.DetailType) + len(e.Detail)
	if !e.Time.IsZero() {
		n += 14
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

func init() {
	register(eventsPrefix+"PutEvents", (*Server).putEventsOp)
}

// Events returns the entries the server accepted, in order.
func (s *Server) Events() []PutEventsEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.putEvents)
}

// FailEntries makes PutEvents ask fn about every well-formed entry: a
// non-empty code fails that entry with the code and message (a partial
// failure), "" accepts it. Nil accepts every entry again. fn runs under the
// server's lock: it must not call the server.
func (s *Server) FailEntries(fn func(PutEventsEntry) (code, message string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failEntry = fn
}

type putEventsRequestEntry struct {
	Source       string   `json:"Source"`
	DetailType   string   `json:"DetailType"`
	Detail       string   `json:"Detail"`
	EventBusName string   `json:"EventBusName"`
	Resources    []string `json:"Resources"`
	Time         epoch    `json:"Time"`
}

type putEventsResultEntry struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

func (s *Server) putEventsOp(body []byte) (any, error) {
	var in struct {
		Entries []putEventsRequestEntry `json:"Entries"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if n := len(in.Entries); n == 0 || n > MaxPutEventsEntries {
		return nil, errorf("ValidationException", "1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to %d", MaxPutEventsEntries)
	}
	entries, total := make([]PutEventsEntry, len(in.Entries)), 0
	for i, r := range in.Entries {
		entries[i] = PutEventsEntry{Source: r.Source, DetailType: r.DetailType, Detail: r.Detail,
			EventBusName: r.EventBusName, Resources: r.Resources, Time: r.Time.Time}
		total += entries[i].Size()
	}
	if total > MaxPutEventsSize {
		return nil, errorf("ValidationException", "Total size of the entries in the request is over the limit.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]putEventsResultEntry, len(entries))
	failed := 0
	for i := range entries {
		out[i] = s.acceptEntry(&entries[i])
		if out[i].ErrorCode != "" {
			failed++
		}
	}
	return map[string]any{"FailedEntryCount": failed, "Entries": out}, nil
}

// acceptEntry checks one entry and records it, or returns its error.
func (s *Server) acceptEntry(e *PutEventsEntry) putEventsResultEntry {
	switch {
	case e.Source == "" || e.DetailType == "" || e.Detail == "":
		return putEventsResultEntry{ErrorCode: "InvalidArgument", ErrorMessage: "Parameters Source, DetailType and Detail are required."}
	case !json.Valid([]byte(e.Detail)) || e.Detail[0] != '{':
		return putEventsResultEntry{ErrorCode: "MalformedDetail", ErrorMessage: "Detail is malformed."}
	}
	if s.failEntry != nil {
		if code, msg := s.failEntry(*e); code != "" {
			return putEventsResultEntry{ErrorCode: code, ErrorMessage: msg}
		}
	}
	e.EventID = s.newID()
	if e.EventBusName == "" {
		e.EventBusName = "default"
	}
	s.putEvents = append(s.putEvents, *e)
	return putEventsResultEntry{EventID: e.EventID}
}
