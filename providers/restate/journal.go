package restate

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxJournalEvents bounds the journal events attached to a row.
const maxJournalEvents = 50

// policyTTL is how long the retry policies of a service are reused.
const policyTTL = time.Minute

// journalEntry is what the poller remembers of an invocation whose rows
// show failures: the row it saw last, and the failure events of its
// journal, read at one modified_at. Restate moves modified_at when an
// invocation pauses, resumes or completes, and not while it retries, so
// while modified_at stays the spells a pause ended do not change. The
// handler's retry policy is read with them, so a policy changed later does
// not recount a pause it did not cause.
type journalEntry struct {
	modifiedAt string            // the modified_at the journal was read at; "" when never read
	events     []json.RawMessage // without their stack traces, oldest first
	paused     bool              // the journal holds a Paused event
	policy     json.RawMessage   // nil when the handler's policy is not known
	policyRead bool              // the admin API answered for the policy
	seenRetry  *int              // the retry_count of the row seen last
	shown      time.Time         // the newest modified_at published for the invocation
}

// policyEntry is the answer of /services/{service}, when it was read.
type policyEntry struct {
	service json.RawMessage // nil when it could not be read
	at      time.Time
}

// withFailures returns a row with what its columns do not tell of its
// failures, and the rows of the pauses a poll did not see (see
// pausesBetween), to publish before it. It reads the TransientError and
// Paused events of the invocation's journal, and the retry policy of its
// handler, whenever the row's own columns cannot give the exact count:
//
//   - a paused row (its retry_count is gone when a policy paused it);
//   - a completed row that failed (it has no retry_count);
//   - a row with a retry_count first seen, or seen at a new modified_at
//     (the invocation may have been paused and resumed since: its
//     retry_count starts again at 1), or whose retry_count went down.
//
// A retry_count that moved up by more than one under the same modified_at
// needs no read: Restate moves modified_at when it pauses, resumes,
// cancels or completes an invocation, and not between attempts, so the
// attempts since the last poll all failed in the spell the row counts.
//
// The events are attached to paused and failed completed rows, and to
// every row of an invocation whose journal holds a pause; the retry
// policy with them. Other rows, and rows whose journal cannot be read, are
// returned as they are (the journal is tried again next sweep).
func (p *Poller) withFailures(ctx context.Context, f rowFacts, row json.RawMessage) (json.RawMessage, []json.RawMessage) {
	e, known := p.journals[f.ID]
	settled := f.Status == "paused" || f.failed()
	if !settled && f.RetryCount == nil && !e.paused {
		return row, nil
	}
	if !known || e.modifiedAt != f.ModifiedAt || wentDown(e.seenRetry, f.RetryCount) {
		events, err := p.readJournal(ctx, f.ID)
		if err != nil {
			p.logger().Warn("cannot read the journal of a failing restate invocation; its count shows next sweep", "invocation", f.ID, "err", err)
			e.modifiedAt = "" // read again next sweep
			p.journals[f.ID] = e
			return row, nil
		}
		e.modifiedAt, e.events, e.paused = f.ModifiedAt, events, hasPaused(events)
		e.policy, e.policyRead = nil, false
	}
	e.seenRetry = f.RetryCount
	if (!settled && !e.paused) || len(e.events) == 0 {
		p.journals[f.ID] = e
		return row, nil
	}
	if !e.policyRead {
		e.policy, e.policyRead = p.retryPolicy(ctx, row)
	}
	p.journals[f.ID] = e
	return attachFailures(row, e.events, e.policy), p.pausesBetween(row, e, f)
}

// readJournal reads the failure events of an invocation's journal, oldest
// first, without their stack traces.
func (p *Poller) readJournal(ctx context.Context, id string) ([]json.RawMessage, error) {
	if err := p.pacer.Wait(ctx, 1); err != nil {
		return nil, err
	}
	events, err := p.Admin.Query(ctx, journalQuery(id))
	if err != nil {
		return nil, err
	}
	for i, ev := range events {
		events[i] = withoutStackTrace(ev)
	}
	return events, nil
}

// wentDown reports whether a retry_count is lower than the one seen
// before.
func wentDown(before, now *int) bool {
	return before != nil && now != nil && *now < *before
}

// hasPaused reports whether the journal events hold a Paused event.
func hasPaused(events []json.RawMessage) bool {
	for _, e := range events {
		var ev struct {
			Type string `json:"event_type"`
		}
		if json.Unmarshal(e, &ev) == nil && ev.Type == "Paused" {
			return true
		}
	}
	return false
}

// withoutStackTrace returns a sys_journal_events row whose event_json has
// no error_stacktrace (in the event, or in its last_failure): a stack trace
// is kilobytes a failure, the message is its first line, and the row's
// last_failure keeps the newest one. Anything it cannot read is returned
// as it is.
func withoutStackTrace(row json.RawMessage) json.RawMessage {
	if !bytes.Contains(row, []byte("error_stacktrace")) {
		return row
	}
	var r map[string]json.RawMessage
	var text string
	if json.Unmarshal(row, &r) != nil || json.Unmarshal(r["event_json"], &text) != nil {
		return row
	}
	var ev map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &ev) != nil {
		return row
	}
	delete(ev, "error_stacktrace")
	if lf, ok := ev["last_failure"]; ok {
		var f map[string]json.RawMessage
		if json.Unmarshal(lf, &f) == nil {
			delete(f, "error_stacktrace")
			ev["last_failure"], _ = json.Marshal(f)
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return row
	}
	r["event_json"], _ = json.Marshal(string(b))
	out, err := json.Marshal(r)
	if err != nil {
		return row
	}
	return out
}

// attachFailures adds to a row object sys_journal_events (the newest
// maxJournalEvents events), sys_journal_events_count, and
// handler_retry_policy when policy is not nil.
func attachFailures(row json.RawMessage, events []json.RawMessage, policy json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(row)
	if len(events) == 0 || len(trimmed) < 2 || trimmed[len(trimmed)-1] != '}' {
		return row
	}
	kept, err := json.Marshal(events[max(len(events)-maxJournalEvents, 0):])
	if err != nil {
		return row
	}
	out := bytes.Clone(trimmed[:len(trimmed)-1])
	out = append(out, `,"sys_journal_events":`...)
	out = append(out, kept...)
	out = append(out, `,"sys_journal_events_count":`...)
	out = strconv.AppendInt(out, int64(len(events)), 10)
	if policy != nil {
		out = append(out, `,"handler_retry_policy":`...)
		out = append(out, policy...)
	}
	return append(out, '}')
}

// retryPolicy returns the effective retry policy of the row's handler,
// {"max_attempts":n,"on_max_attempts":"Pause"}, from the admin API's
// /services/{service} (read at most once a policyTTL per service, so the
// invocations a fault pauses together share one read), or nil when it is
// not known; read is false when the admin API did not answer.
func (p *Poller) retryPolicy(ctx context.Context, row json.RawMessage) (policy json.RawMessage, read bool) {
	service, handler := rowHandler(row)
	if service == "" {
		return nil, true
	}
	e, ok := p.policies[service]
	if !ok || p.Now().Sub(e.at) >= policyTTL {
		e = policyEntry{at: p.Now()}
		if err := p.pacer.Wait(ctx, 1); err != nil {
			return nil, false
		}
		svc, err := p.Admin.Get(ctx, "/services/"+url.PathEscape(service), "services")
		if err != nil {
			p.logger().Warn("cannot read a restate service's retry policy; a paused invocation's attempts are counted from its journal alone", "service", service, "err", err)
		}
		e.service = svc
		p.policies[service] = e
	}
	return effectivePolicy(e.service, handler), e.service != nil
}

// rowHandler returns the service and handler a row's invocation targets;
// "" when the row does not say.
func rowHandler(row json.RawMessage) (service, handler string) {
	var r struct {
		Service string `json:"target_service_name"`
		Target  string `json:"target"`
	}
	if json.Unmarshal(row, &r) != nil || r.Service == "" || r.Target == "" {
		return "", ""
	}
	return r.Service, r.Target[strings.LastIndexByte(r.Target, '/')+1:]
}

// effectivePolicy picks a handler's retry policy out of a /services/{name}
// answer: the handler's own settings, else the service's.
func effectivePolicy(service json.RawMessage, handler string) json.RawMessage {
	type policy struct {
		MaxAttempts   *int    `json:"max_attempts"`
		OnMaxAttempts *string `json:"on_max_attempts"`
	}
	var svc struct {
		Handlers []struct {
			Name   string  `json:"name"`
			Policy *policy `json:"retry_policy"`
		} `json:"handlers"`
		Policy *policy `json:"retry_policy"`
	}
	if service == nil || json.Unmarshal(service, &svc) != nil {
		return nil
	}
	eff := policy{}
	if svc.Policy != nil {
		eff = *svc.Policy
	}
	for _, h := range svc.Handlers {
		if h.Name == handler && h.Policy != nil {
			if h.Policy.MaxAttempts != nil {
				eff.MaxAttempts = h.Policy.MaxAttempts
			}
			if h.Policy.OnMaxAttempts != nil {
				eff.OnMaxAttempts = h.Policy.OnMaxAttempts
			}
		}
	}
	if eff.MaxAttempts == nil || eff.OnMaxAttempts == nil {
		return nil
	}
	b, err := json.Marshal(eff)
	if err != nil {
		return nil
	}
	return b
}

// readFailures attaches to a row what the poller would (its journal's
// failure events and its handler's retry policy), read afresh, when its
// status calls for them: the operator's reads, which keep no memory of
// the invocation between calls. A journal or policy that cannot be read
// leaves the row without it.
func readFailures(ctx context.Context, c *Client, row json.RawMessage) json.RawMessage {
	f, err := factsOf(row)
	settled := err == nil && (f.Status == "paused" || f.failed())
	if err != nil || (!settled && f.RetryCount == nil) {
		return row
	}
	events, err := c.Query(ctx, journalQuery(f.ID))
	if err != nil || len(events) == 0 || (!settled && !hasPaused(events)) {
		return row
	}
	for i, ev := range events {
		events[i] = withoutStackTrace(ev)
	}
	var policy json.RawMessage
	if service, handler := rowHandler(row); service != "" {
		if svc, err := c.Get(ctx, "/services/"+url.PathEscape(service), "services"); err == nil {
			policy = effectivePolicy(svc, handler)
		}
	}
	return attachFailures(row, events, policy)
}
