package consumers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/substatehq/substate"
)

// DefaultRestateColumns are the sys_invocation columns the poller selects:
// the ones the mapping reads, and next_retry_at as evidence.
var DefaultRestateColumns = []string{
	"id", "target", "target_service_name", "target_service_key", "status",
	"created_at", "modified_at", "running_at", "completed_at", "retry_count",
	"last_failure", "last_failure_error_code", "next_retry_at",
	"completion_result", "completion_failure",
}

// maxRestateResponse bounds the body of one admin API answer.
const maxRestateResponse = 32 << 20

// restateQuery returns the SQL the poller sends for the invocation ids:
// the columns of sys_invocation for the rows whose id is one of ids. The
// ids must pass validInvocationID, so they need no escaping beyond quotes.
func restateQuery(columns, ids []string) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(strings.Join(columns, ", "))
	b.WriteString(" FROM sys_invocation WHERE id IN (")
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + strings.ReplaceAll(id, "'", "''") + "'")
	}
	b.WriteString(")")
	return b.String()
}

// validInvocationID reports whether id looks like a Restate invocation id
// ("inv_" and base62): letters, digits, '_' and '-', at most 128 bytes.
func validInvocationID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// query sends one /query request and returns the rows of the answer.
func (p *RestatePoller) query(ctx context.Context, ids []string) ([]json.RawMessage, error) {
	body, err := json.Marshal(map[string]string{"query": restateQuery(p.Columns, ids)})
	if err != nil {
		return nil, substate.WrapError(substate.EINTERNAL, err, "restate admin query: encode request")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.URL, "/")+"/query", bytes.NewReader(body))
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate admin query: bad admin url %q", p.URL)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if p.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.Token)
	}
	p.Metrics.CountCall(substate.ProviderRestate, "query")
	resp, err := p.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin query: admin api unreachable")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRestateResponse))
	if err != nil {
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin query: read answer")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, restateError(resp.StatusCode, b)
	}
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate admin query: decode answer")
	}
	return page.Rows, nil
}

// restateError turns an error answer of the admin API ({"message": …})
// into a substate error whose code says whether retrying can help.
func restateError(status int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	code := substate.EINVALID
	switch {
	case status == http.StatusTooManyRequests:
		code = substate.ETHROTTLED
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		code = substate.EUNAUTHORIZED
	case status >= 500:
		code = substate.EUNAVAILABLE
	}
	return substate.Errorf(code, "restate admin query: HTTP %d: %s", status, msg)
}

// restateRaw returns the raw event of one sys_invocation row and the row's
// invocation id. The event id is the invocation id and the row's
// modified_at (a hash of the row when it has none), so an unchanged row
// keeps its id from one poll to the next.
func restateRaw(row json.RawMessage) (substate.RawEvent, string, error) {
	var r struct {
		ID         string          `json:"id"`
		ModifiedAt json.RawMessage `json:"modified_at"`
	}
	if err := json.Unmarshal(row, &r); err != nil {
		return substate.RawEvent{}, "", substate.WrapError(substate.EINVALID, err, "decode restate row")
	}
	if r.ID == "" {
		return substate.RawEvent{}, "", substate.Errorf(substate.EINVALID, "restate row has no id")
	}
	version := strings.Trim(string(r.ModifiedAt), `"`)
	if version == "" || version == "null" {
		sum := sha256.Sum256(row)
		version = hex.EncodeToString(sum[:12])
	}
	id := fmt.Sprintf("restate-poll-%s@%s", r.ID, version)
	return substate.RawEvent{Kind: substate.RawRestate, ID: id, Body: row}, r.ID, nil
}
