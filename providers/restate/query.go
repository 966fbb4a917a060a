package restate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// DefaultColumns are the sys_invocation columns the poller selects:
// the ones the mapping reads (idempotency_key is what name: tenant rules
// match for an invocation of a keyless service), and next_retry_at as
// evidence.
var DefaultColumns = []string{
	"id", "target", "target_service_name", "target_service_key", "idempotency_key", "status",
	"created_at", "modified_at", "running_at", "completed_at", "retry_count",
	"last_failure", "last_failure_error_code", "next_retry_at",
	"completion_result", "completion_failure",
}

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

// rowFacts are what the poller reads of a row: which invocation, when it
// last changed, its status, its attempt, how it completed, and whether
// its service is keyless.
type rowFacts struct {
	ID               string
	ModifiedAt       string
	Status           string
	RetryCount       *int
	CompletionResult string
	HasFailure       bool // the row has a completion_failure
	Keyless          bool // the row has no target_service_key
}

// failed reports a completed invocation that did not succeed.
func (f rowFacts) failed() bool {
	return f.Status == "completed" && f.CompletionResult != "success" && (f.CompletionResult != "" || f.HasFailure)
}

// factsOf reads the facts of a row; a row without an id is EINVALID.
func factsOf(row json.RawMessage) (rowFacts, error) {
	var r struct {
		ID                string          `json:"id"`
		ModifiedAt        json.RawMessage `json:"modified_at"`
		Status            string          `json:"status"`
		RetryCount        *int            `json:"retry_count"`
		CompletionResult  string          `json:"completion_result"`
		CompletionFailure string          `json:"completion_failure"`
		Key               string          `json:"target_service_key"`
	}
	if err := json.Unmarshal(row, &r); err != nil {
		return rowFacts{}, substate.WrapError(substate.EINVALID, err, "decode restate row")
	}
	if r.ID == "" {
		return rowFacts{}, substate.Errorf(substate.EINVALID, "restate row has no id")
	}
	return rowFacts{ID: r.ID, ModifiedAt: strings.Trim(string(r.ModifiedAt), `"`), Status: r.Status,
		RetryCount: r.RetryCount, CompletionResult: r.CompletionResult, HasFailure: r.CompletionFailure != "", Keyless: r.Key == ""}, nil
}

// polledRow is a row of an admin query answer with its facts, read once.
type polledRow struct {
	raw   json.RawMessage
	facts rowFacts
	err   error // the row has no id, or is not an object
}

// polledRows reads the facts of each row of an answer.
func polledRows(rows []json.RawMessage) []polledRow {
	out := make([]polledRow, len(rows))
	for i, row := range rows {
		f, err := factsOf(row)
		out[i] = polledRow{raw: row, facts: f, err: err}
	}
	return out
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
