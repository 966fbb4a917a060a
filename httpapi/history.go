package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/redact"
)

// Page sizes of GET /v1/tenants/{id}/history.
const (
	DefaultHistoryLimit = 1000
	MaxHistoryLimit     = 10000
)

// history serves GET /v1/tenants/{id}/history from s.History: the
// tenant's transitions, oldest first, as a substate.HistoryPage. Query
// parameters: since and until (RFC 3339, a date, or a duration before now
// such as 24h) bound when the events were recorded; raw=true attaches the
// provider's payloads, and needs read:raw; limit (default 1000, at most
// 10000) and afterSeq page. The payloads' input and output are redacted by
// s.Redaction unless the caller is an admin. One caller runs at most
// MaxHistoryReadsPerCaller reads at once; its others wait their turn.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q, err := ParseHistoryQuery(r.URL.Query(), time.Now())
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	q.TenantID = r.PathValue("id")
	p := principal(r)
	if err := checkHistory(p, q); err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	release, err := s.historyTurn(r, p, q.TenantID)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	page, err := s.History.History(r.Context(), q)
	release()
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	if !p.Unredacted() {
		redactPage(&page, s.Redaction)
	}
	linkTraces(&page, s.TraceUI)
	if page.Actions == nil {
		page.Actions = []substate.AuditEvent{}
	}
	httpx.JSON(w, http.StatusOK, page)
}

// TraceIDPlaceholder is where the trace id goes in Server.TraceUI.
const TraceIDPlaceholder = "{traceId}"

// linkTraces gives each transition with a trace its link in the trace UI
// the template names ({traceId} replaced), when there is a template.
func linkTraces(page *substate.HistoryPage, template string) {
	if template == "" {
		return
	}
	for i := range page.Transitions {
		if t := &page.Transitions[i]; t.TraceID != "" {
			t.TraceURL = strings.ReplaceAll(template, TraceIDPlaceholder, t.TraceID)
		}
	}
}

// checkHistory checks a history request against its principal.
func checkHistory(p Principal, q substate.HistoryQuery) error {
	if q.Raw && !p.Can(ScopeReadRaw) {
		return substate.Errorf(substate.EFORBIDDEN, "key %q has scope %s; raw evidence needs %s", p.Name, p.Scope, ScopeReadRaw)
	}
	return p.CheckTenant(q.TenantID)
}

// redactPage redacts the raw evidence of every transition of a page.
func redactPage(page *substate.HistoryPage, policy *redact.Policy) {
	for i := range page.Transitions {
		if ev := page.Transitions[i].Raw; ev != nil && len(ev.Body) > 0 {
			ev.Body = RedactEvidence(ev.Body, policy)
		}
	}
}

// RedactEvidence redacts an evidence body: the input and output of a JSON
// payload (redact.Policy.Payload); a payload that was not JSON, kept as a
// JSON string, is replaced whole.
func RedactEvidence(body json.RawMessage, policy *redact.Policy) json.RawMessage {
	if len(body) > 0 && body[0] == '"' {
		return json.RawMessage(`"` + redact.Redacted + `"`)
	}
	return policy.Payload(body)
}

// ParseHistoryQuery reads the query parameters of the history route.
func ParseHistoryQuery(v url.Values, now time.Time) (substate.HistoryQuery, error) {
	var q substate.HistoryQuery
	var err error
	if q.Since, err = ParseWhen("since", v.Get("since"), now); err != nil {
		return q, err
	}
	if q.Until, err = ParseWhen("until", v.Get("until"), now); err != nil {
		return q, err
	}
	if s := v.Get("raw"); s != "" {
		if q.Raw, err = strconv.ParseBool(s); err != nil {
			return q, substate.Errorf(substate.EINVALID, "raw %q: want true or false", s)
		}
	}
	if q.Limit, err = nonNegative("limit", v.Get("limit")); err != nil {
		return q, err
	}
	q.Limit = min(cmp.Or(q.Limit, DefaultHistoryLimit), MaxHistoryLimit)
	if s := v.Get("afterSeq"); s != "" {
		if q.AfterSeq, err = strconv.ParseUint(s, 10, 64); err != nil {
			return q, substate.Errorf(substate.EINVALID, "afterSeq %q: want a stream sequence", s)
		}
	}
	return q, nil
}

// EncodeHistoryQuery writes q as the query parameters ParseHistoryQuery
// reads (the tenant is in the path); zero fields are left out.
func EncodeHistoryQuery(q substate.HistoryQuery) url.Values {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Raw {
		v.Set("raw", "true")
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.AfterSeq != 0 {
		v.Set("afterSeq", strconv.FormatUint(q.AfterSeq, 10))
	}
	return v
}

// ParseWhen reads a point in time: RFC 3339, a date (midnight UTC), or a
// duration before now such as 90m or 24h. The empty string is the zero time.
func ParseWhen(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, substate.Errorf(substate.EINVALID, "%s %q: want an RFC 3339 time, a date (2006-01-02) or a duration before now (24h)", name, s)
}
