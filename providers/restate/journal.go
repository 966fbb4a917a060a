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

// journalEntry is the failure events of an invocation's journal, read at
// one modified_at: Restate moves modified_at when an invocation pauses or
// resumes, so while it stays the spells a pause ended do not change. The
// handler's retry policy is read with them, so a policy changed later
// does not recount a pause it did not cause.
type journalEntry struct {
	modifiedAt string
	events     []json.RawMessage
	paused     bool            // the journal holds a Paused event
	policy     json.RawMessage // nil when the handler's policy is not known
	policyRead bool            // the admin API answered for the policy
}

// policyEntry is the answer of /services/{service}, when it was read.
type policyEntry struct {
	service json.RawMessage // nil when it could not be read
	at      time.Time
}

// withFailures returns a row with what its columns do not tell of its
// failures: for a paused row, and a backing-off, running or ready row of
// an invocation the poller saw paused before (Restate's retry_count starts
// again at 1 after a resume), the TransientError and Paused events of its
// journal and the retry policy of its handler. Other rows, and rows whose
// journal cannot be read, are returned as they are (the journal is tried
// again next sweep).
func (p *Poller) withFailures(ctx context.Context, id, modifiedAt, status string, row json.RawMessage) json.RawMessage {
	e, known := p.journals[id]
	resumed := known && e.paused && (status == "backing-off" || status == "running" || status == "ready")
	if status != "paused" && !resumed {
		return row
	}
	if !known || e.modifiedAt != modifiedAt {
		if err := p.pacer.Wait(ctx, 1); err != nil {
			return row
		}
		events, err := p.Admin.Query(ctx, journalQuery(id))
		if err != nil {
			p.logger().Warn("cannot read the journal of a paused restate invocation; its failures show next sweep", "invocation", id, "err", err)
			return row
		}
		e = journalEntry{modifiedAt: modifiedAt, events: events, paused: hasPaused(events)}
	}
	if !e.policyRead {
		e.policy, e.policyRead = p.retryPolicy(ctx, row)
	}
	p.journals[id] = e
	return attachFailures(row, e.events, e.policy)
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
	var r struct {
		Service string `json:"target_service_name"`
		Target  string `json:"target"`
	}
	if json.Unmarshal(row, &r) != nil || r.Service == "" || r.Target == "" {
		return nil, true
	}
	handler := r.Target[strings.LastIndexByte(r.Target, '/')+1:]
	e, ok := p.policies[r.Service]
	if !ok || p.Now().Sub(e.at) >= policyTTL {
		e = policyEntry{at: p.Now()}
		if err := p.pacer.Wait(ctx, 1); err != nil {
			return nil, false
		}
		svc, err := p.Admin.Get(ctx, "/services/"+url.PathEscape(r.Service), "services")
		if err != nil {
			p.logger().Warn("cannot read a restate service's retry policy; a paused invocation's attempts are counted from its journal alone", "service", r.Service, "err", err)
		}
		e.service = svc
		p.policies[r.Service] = e
	}
	return effectivePolicy(e.service, handler), e.service != nil
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
