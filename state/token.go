package state

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/substatehq/substate"
)

// tokenVersion is the first byte of every page token.
const tokenVersion = 1

// pageToken is where the next page of a listing starts: after key in the
// index of kind, for the query with fingerprint query.
type pageToken struct {
	kind  byte
	query uint32
	key   []byte
}

// errBadToken is the answer to a page token this store did not issue for
// the same query.
var errBadToken = substate.Errorf(substate.EINVALID, "invalid page token")

// encodeToken returns t as URL-safe base64 of: version, kind, the query's
// fingerprint (4 bytes, big-endian), the last key of the previous page.
func encodeToken(t pageToken) string {
	b := make([]byte, 0, 6+len(t.key))
	b = append(b, tokenVersion, t.kind)
	b = binary.BigEndian.AppendUint32(b, t.query)
	b = append(b, t.key...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken parses a token made by encodeToken; anything else is
// errBadToken.
func decodeToken(s string) (pageToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 7 || b[0] != tokenVersion {
		return pageToken{}, errBadToken
	}
	return pageToken{kind: b[1], query: binary.BigEndian.Uint32(b[2:6]), key: b[6:]}, nil
}

// fingerprint identifies a filter without its page fields, so a token is
// only accepted by the query that issued it.
func fingerprint(f *substate.TenantFilter) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%t|%d|%t", f.SubState, f.HasError, f.MinRetryCount, f.SortRetryDesc)
	if f.SortUpdatedDesc || f.Provider != "" || f.TenantPrefix != "" {
		fmt.Fprintf(h, "|%t|%s|%q", f.SortUpdatedDesc, f.Provider, f.TenantPrefix)
	}
	if f.Fingerprint != "" || f.Verb != "" || f.InStateLongerThan != 0 {
		fmt.Fprintf(h, "|%q|%s|%d", f.Fingerprint, f.Verb, f.InStateLongerThan)
	}
	if f.Stuck {
		fmt.Fprint(h, "|stuck")
	}
	if f.Step != "" || f.WorkflowType != "" {
		fmt.Fprintf(h, "|%q|%q", f.Step, f.WorkflowType)
	}
	if f.Reverse {
		fmt.Fprint(h, "|reverse")
	}
	return h.Sum32()
}
