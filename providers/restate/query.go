package restate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// DefaultColumns are the sys_invocation columns the poller selects:
// the ones the mapping reads, and next_retry_at as evidence.
var DefaultColumns = []string{
	"id", "target", "target_service_name", "target_service_key", "status",
	"created_at", "modified_at", "running_at", "completed_at", "retry_count",
	"last_failure", "last_failure_error_code", "next_retry_at",
	"completion_result", "completion_failure",
}

// maxRestateResponse bounds the body of one admin API answer.
const maxRestateResponse = 32 << 20

// restateTimeLayout is how the poller writes a modified_at cursor in SQL.
const restateTimeLayout = "2006-01-02T15:04:05.000Z"

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlList is the quoted, comma-separated list of values.
func sqlList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = sqlString(v)
	}
	return strings.Join(quoted, ", ")
}

// restateQuery returns the SQL that reads the rows of the invocation ids,
// which must pass validInvocationID: Restate fails the whole query with
// HTTP 500 for one id it cannot parse.
func restateQuery(columns, ids []string) string {
	return "SELECT " + strings.Join(columns, ", ") + " FROM sys_invocation WHERE id IN (" + sqlList(ids) + ")"
}

// discoveryCursor is where discovery goes on from: the rows after
// (ModifiedAt, ID) in that order.
type discoveryCursor struct {
	ModifiedAt time.Time
	ID         string
}

// discoveryQuery returns the SQL that reads, in (modified_at, id) order,
// up to limit rows of the services after the cursor. A non-zero since
// keeps only the rows modified since then and those not completed, however
// old (the first discovery).
func discoveryQuery(columns, services []string, after discoveryCursor, since time.Time, limit int) string {
	at := sqlString(after.ModifiedAt.UTC().Format(restateTimeLayout))
	where := fmt.Sprintf("(modified_at > %s OR (modified_at = %s AND id > %s))", at, at, sqlString(after.ID))
	if !since.IsZero() {
		where += fmt.Sprintf(" AND (modified_at >= %s OR status <> 'completed')", sqlString(since.UTC().Format(restateTimeLayout)))
	}
	return fmt.Sprintf("SELECT %s FROM sys_invocation WHERE target_service_name IN (%s) AND %s ORDER BY modified_at, id LIMIT %d",
		strings.Join(columns, ", "), sqlList(services), where, limit)
}

// journalQuery returns the SQL that reads the failure events of one
// invocation from its journal, oldest first.
func journalQuery(id string) string {
	return "SELECT id, appended_at, event_type, event_json FROM sys_journal_events WHERE id = " + sqlString(id) +
		" AND event_type IN ('TransientError', 'Paused') ORDER BY appended_at"
}

// Invocation ids are "inv_", the id scheme version "1", then a partition
// key (a u64) and a UUID (a u128), each in fixed-width base62 over the
// alphabet 0-9a-zA-Z: 11 and 22 characters.
const (
	invocationPrefix = "inv_1"
	invocationLen    = len(invocationPrefix) + 11 + 22
	base62Alphabet   = "0123456789abcdefghijklmnopqrstuvwxyz" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

var (
	maxU64  = new(big.Int).SetUint64(^uint64(0))
	maxU128 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
)

// validInvocationID reports whether id is an invocation id Restate can
// parse: "inv_1" and the base62 partition key and UUID, each within its
// integer's range.
func validInvocationID(id string) bool {
	if len(id) != invocationLen || !strings.HasPrefix(id, invocationPrefix) {
		return false
	}
	key, uuid := id[len(invocationPrefix):len(invocationPrefix)+11], id[len(invocationPrefix)+11:]
	return base62Within(key, maxU64) && base62Within(uuid, maxU128)
}

// base62Within reports whether s is base62 and its value at most limit.
func base62Within(s string, limit *big.Int) bool {
	v, digit := new(big.Int), new(big.Int)
	for i := range len(s) {
		d := strings.IndexByte(base62Alphabet, s[i])
		if d < 0 {
			return false
		}
		v.Mul(v, big.NewInt(62)).Add(v, digit.SetInt64(int64(d)))
	}
	return v.Cmp(limit) <= 0
}

// query sends one /query request and returns the rows of the answer.
func (p *Poller) query(ctx context.Context, sql string) ([]json.RawMessage, error) {
	body, err := json.Marshal(map[string]string{"query": sql})
	if err != nil {
		return nil, substate.WrapError(substate.EINTERNAL, err, "restate admin query: encode request")
	}
	b, err := p.send(ctx, http.MethodPost, "/query", "query", body)
	if err != nil {
		return nil, err
	}
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate admin query: decode answer")
	}
	return page.Rows, nil
}

// get sends one GET to the admin API and returns the answer's body, which
// must be JSON.
func (p *Poller) get(ctx context.Context, path, operation string) (json.RawMessage, error) {
	b, err := p.send(ctx, http.MethodGet, path, operation, nil)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, substate.Errorf(substate.EINVALID, "restate admin api: %s answered with invalid JSON", path)
	}
	return b, nil
}

// send sends one request to the admin API (a JSON body when body is not
// nil), counted as operation, and returns the body of a 200 answer. An
// answer larger than maxRestateResponse is refused, not cut.
func (p *Poller) send(ctx context.Context, method, path, operation string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(p.URL, "/")+path, rd)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate admin api: bad admin url %q", p.URL)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.Token)
	}
	p.Metrics.CountCall(substate.ProviderRestate, operation)
	resp, err := p.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin api: admin api unreachable")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRestateResponse+1))
	if err != nil {
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin api: read answer")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, restateError(resp.StatusCode, b)
	}
	if len(b) > maxRestateResponse {
		return nil, substate.Errorf(substate.EINVALID, "restate admin api: %s answered with more than %d MiB", path, maxRestateResponse>>20)
	}
	return b, nil
}

// restateAnswerError is an error answer of the admin API: the server
// answered, so the query (and not the network) may be at fault.
type restateAnswerError struct {
	status  int
	message string
}

func (e restateAnswerError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.message) }

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
	return substate.WrapError(code, restateAnswerError{status, msg}, "restate admin query")
}

// answered reports an error answer that a narrower query may not get:
// the server answered, and not with a throttling or credential refusal.
func answered(err error) bool {
	var e restateAnswerError
	if !errors.As(err, &e) {
		return false
	}
	return e.status != http.StatusTooManyRequests && e.status != http.StatusUnauthorized && e.status != http.StatusForbidden
}

// restateRowID returns the invocation id and modified_at of a row.
func restateRowID(row json.RawMessage) (id, modifiedAt, status string, err error) {
	var r struct {
		ID         string          `json:"id"`
		ModifiedAt json.RawMessage `json:"modified_at"`
		Status     string          `json:"status"`
	}
	if err := json.Unmarshal(row, &r); err != nil {
		return "", "", "", substate.WrapError(substate.EINVALID, err, "decode restate row")
	}
	if r.ID == "" {
		return "", "", "", substate.Errorf(substate.EINVALID, "restate row has no id")
	}
	return r.ID, strings.Trim(string(r.ModifiedAt), `"`), r.Status, nil
}

// restateRaw returns the raw event of one row (with whatever the poller
// attached to it). Its id names the invocation, its modified_at and a hash
// of the row: Restate keeps modified_at still while an invocation retries,
// so the hash tells the rows of one modified_at apart, and an unchanged
// row keeps its id from one poll to the next.
func restateRaw(id, modifiedAt string, row json.RawMessage) substate.RawEvent {
	sum := sha256.Sum256(row)
	raw := fmt.Sprintf("restate-poll-%s@%s#%s", id, modifiedAt, hex.EncodeToString(sum[:8]))
	return substate.RawEvent{Kind: substate.RawRestate, ID: raw, Body: row}
}
