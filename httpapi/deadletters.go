package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// DeadLetterParams are the query parameters of GET /v1/deadletters.
var DeadLetterParams = []string{"stage", "since", "afterSeq", "limit"}

// ParseDeadLetterQuery reads the query parameters of GET /v1/deadletters:
// stage, since (as the history route's), afterSeq and limit.
func ParseDeadLetterQuery(q url.Values, now time.Time) (substate.DeadLetterQuery, error) {
	var d substate.DeadLetterQuery
	if err := CheckParams(q, DeadLetterParams); err != nil {
		return d, err
	}
	d.Stage = first(q, "stage")
	if len(d.Stage) > 64 {
		return d, substate.Errorf(substate.EINVALID, "stage: longer than 64 bytes, which no stage is")
	}
	var err error
	if d.Since, err = ParseWhen("since", first(q, "since"), now); err != nil {
		return d, err
	}
	if v := first(q, "afterSeq"); v != "" {
		if d.AfterSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
			return d, substate.Errorf(substate.EINVALID, "afterSeq %s: want a stream sequence", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	d.Limit, err = nonNegative("limit", first(q, "limit"))
	return d, err
}

// EncodeDeadLetterQuery writes q as the parameters ParseDeadLetterQuery
// reads; zero fields are left out.
func EncodeDeadLetterQuery(q substate.DeadLetterQuery) url.Values {
	v := url.Values{}
	if q.Stage != "" {
		v.Set("stage", q.Stage)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if q.AfterSeq != 0 {
		v.Set("afterSeq", strconv.FormatUint(q.AfterSeq, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// deadLetters serves GET /v1/deadletters: a page of SUBSTATE_DLQ, oldest
// first. A payload is provider evidence: it needs read:raw (it is left
// out otherwise, with why), and is redacted by s.Redaction unless the
// caller is admin. A key with a tenant prefix sees the dead letters whose
// payload names one of its tenants.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	q, err := ParseDeadLetterQuery(r.URL.Query(), time.Now())
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	page, err := s.DeadLetters.DeadLetters(r.Context(), q)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	p := principal(r)
	shown := page.DeadLetters[:0]
	for _, d := range page.DeadLetters {
		if p.SeesTenant(d.TenantID) {
			shown = append(shown, s.showDeadLetter(d, p))
		}
	}
	page.DeadLetters = shown
	httpx.JSON(w, http.StatusOK, page)
}

// showDeadLetter is d as principal p may see it.
func (s *Server) showDeadLetter(d substate.StoredDeadLetter, p Principal) substate.StoredDeadLetter {
	switch {
	case !p.Can(ScopeReadRaw):
		d.Payload, d.Redacted, d.PayloadOmitted = nil, true, "the payload is provider evidence: it needs a read:raw key"
	case !p.Unredacted():
		d.Payload, d.Redacted = RedactEvidence(d.Payload, s.Redaction), true
	}
	return d
}
