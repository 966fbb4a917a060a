package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/replay"
)

// Page sizes of the dead-letter list.
const (
	defaultDLQLimit = 50
	maxDLQLimit     = 200
	// maxListedPayload is the largest payload a page carries: with up to
	// 1 MiB a message, a page of 200 could otherwise be hundreds of MB,
	// and a payload that size is no use inline anyway.
	maxListedPayload = 64 << 10
)

// DeadLetter is one entry of SUBSTATE_DLQ as the console lists it.
type DeadLetter struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Stage    string    `json:"stage"`
	Reason   string    `json:"reason"`
	TenantID string    `json:"tenantId,omitempty"` // when the payload names one
	Subject  string    `json:"subject"`            // where the message was
	// RawSeq is the SUBSTATE_RAW sequence of the message, when it was a raw
	// message: such a dead letter can be requeued (mapped again).
	RawSeq uint64 `json:"rawSeq,omitempty"`
	// Payload is the message as received (JSON, or the bytes as a JSON
	// string) for admin, redacted for read:raw, and left out for read: a
	// dead payload is provider evidence.
	Payload  json.RawMessage `json:"payload,omitempty"`
	Redacted bool            `json:"redacted"`
	// PayloadOmitted says why there is no payload: the caller may not read
	// raw evidence, or it is larger than a page carries.
	PayloadOmitted string `json:"payloadOmitted,omitempty"`
}

// DeadLetterPage is a page of dead letters, newest first.
type DeadLetterPage struct {
	DeadLetters []DeadLetter `json:"deadLetters"`
	// Before, when not 0, is the query parameter of the next (older) page.
	Before uint64 `json:"before,omitempty"`
}

// deadLetters serves GET /console/api/deadletters?before=SEQ&limit=N: the
// dead letters below sequence before (default: the newest), newest first.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, before := defaultDLQLimit, uint64(0)
	err := httpapi.CheckParams(q, []string{"before", "limit"})
	if err != nil {
		httpx.Error(w, r, err, nil)
		return
	}
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 {
			httpx.Error(w, r, substate.Errorf(substate.EINVALID, "limit %q: want a positive integer", s), nil)
			return
		}
		limit = min(limit, maxDLQLimit)
	}
	if s := q.Get("before"); s != "" {
		if before, err = strconv.ParseUint(s, 10, 64); err != nil {
			httpx.Error(w, r, substate.Errorf(substate.EINVALID, "before %q: want a stream sequence", s), nil)
			return
		}
	}
	if c.JS == nil {
		httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE, "no NATS connection"), nil)
		return
	}
	rd := &replay.Reader{JS: c.JS, IdleTimeout: time.Second}
	first, last, n, err := rd.Bounds(r.Context(), substate.StreamDLQ)
	if err != nil {
		httpx.Error(w, r, err, c.logger())
		return
	}
	page := DeadLetterPage{DeadLetters: []DeadLetter{}}
	if before == 0 || before > last {
		before = last + 1
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	if n > 0 && before > first {
		from := first
		if before-first > uint64(limit) {
			from = before - uint64(limit)
		}
		for m, err := range rd.Messages(r.Context(), substate.StreamDLQ, "", replay.Range{FromSeq: from, ToSeq: before - 1}) {
			if err != nil {
				httpx.Error(w, r, err, c.logger())
				return
			}
			if d := c.deadLetter(m, p); p.SeesTenant(d.TenantID) {
				page.DeadLetters = append(page.DeadLetters, d)
			}
		}
		if from > first {
			page.Before = from
		}
	}
	for i, j := 0, len(page.DeadLetters)-1; i < j; i, j = i+1, j-1 {
		page.DeadLetters[i], page.DeadLetters[j] = page.DeadLetters[j], page.DeadLetters[i]
	}
	httpx.JSON(w, http.StatusOK, page)
}

// deadLetter describes one DLQ message for principal p: the payload is
// redacted unless p is admin, and left out unless p may read raw evidence.
func (c *Console) deadLetter(m replay.Message, p httpapi.Principal) DeadLetter {
	h := m.Header
	d := DeadLetter{
		Seq: m.Seq, Time: m.Stored.UTC(), Stage: h.Get(substate.HeaderDLQStage), Reason: h.Get(substate.HeaderDLQReason),
		Subject: h.Get(substate.HeaderDLQSubject), TenantID: replay.DeadLetterTenant(m.Data),
	}
	if strings.HasPrefix(d.Subject, substate.SubjectRawPrefix) {
		d.RawSeq, _ = strconv.ParseUint(h.Get(substate.HeaderDLQSeq), 10, 64)
	}
	switch {
	case !p.Can(httpapi.ScopeReadRaw):
		d.Redacted, d.PayloadOmitted = true, "the payload is provider evidence: it needs a read:raw key"
	case len(m.Data) > maxListedPayload:
		d.PayloadOmitted = fmt.Sprintf("%d bytes, more than the %d KiB a page lists: substate events dlq --json prints it", len(m.Data), maxListedPayload>>10)
	case !json.Valid(m.Data):
		d.Payload, _ = json.Marshal(strings.ToValidUTF8(string(m.Data), "\uFFFD"))
	default:
		d.Payload = m.Data
	}
	if d.Payload != nil && !p.Unredacted() {
		d.Payload, d.Redacted = httpapi.RedactEvidence(d.Payload, c.Redact), true
	}
	return d
}

// requeue serves POST /console/api/deadletters/{seq}/requeue (admin): the
// raw message the dead letter names is mapped again, as renormalize does;
// events already in SUBSTATE_EVENTS are not published twice. A key with a
// tenant prefix acts only on a dead letter it lists, and the events mapped
// must all be of its tenants: they are checked after mapping and before
// anything is published (403 otherwise), since a mapping may place the
// message elsewhere than its payload suggests (a tenant rule on the
// execution name).
func (c *Console) requeue(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		httpx.Error(w, r, substate.Errorf(substate.EINVALID, "dead letter %q: want a stream sequence", r.PathValue("seq")), nil)
		return
	}
	if c.Requeue == nil || c.JS == nil {
		httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE, "requeue is not available on this worker"), nil)
		return
	}
	m, err := (&replay.Reader{JS: c.JS}).Get(r.Context(), substate.StreamDLQ, seq)
	if err != nil {
		httpx.Error(w, r, err, c.logger())
		return
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	d := c.deadLetter(m, httpapi.Principal{Scope: httpapi.ScopeAdmin})
	if !p.SeesTenant(d.TenantID) {
		httpx.Error(w, r, substate.Errorf(substate.EFORBIDDEN,
			"dead letter %d is not one of key %q's tenants (prefix %q): it does not list it", seq, p.Name, p.TenantPrefix), nil)
		return
	}
	if d.RawSeq == 0 {
		httpx.Error(w, r, substate.Errorf(substate.ECONFLICT,
			"dead letter %d (stage %s) is not a raw message kept in %s: nothing to map again", seq, d.Stage, substate.StreamRaw), nil)
		return
	}
	published, err := c.Requeue(r.Context(), d.RawSeq, requeueAllowed(p, seq))
	if err != nil {
		httpx.Error(w, r, err, c.logger())
		return
	}
	c.logger().Info("dead letter requeued", "dlq_seq", seq, "raw_seq", d.RawSeq, "published", published, "by", p.Name)
	httpx.JSON(w, http.StatusOK, map[string]any{"seq": seq, "rawSeq": d.RawSeq, "published": published})
}

// requeueAllowed is the check of the tenants a requeue by p maps dead
// letter seq to: each must be one of p's.
func requeueAllowed(p httpapi.Principal, seq uint64) func(string) error {
	return func(tenant string) error {
		if p.SeesTenant(tenant) {
			return nil
		}
		return substate.Errorf(substate.EFORBIDDEN,
			"dead letter %d maps to tenant %s, which is not one of key %q's tenants (prefix %q): nothing was published",
			seq, substate.QuotePrefix(tenant, substate.QuoteLimit), p.Name, p.TenantPrefix)
	}
}
