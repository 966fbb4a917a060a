package state

import (
	"encoding/binary"
	"time"

	"github.com/substatehq/substate"
)

// The group indexes and counters, kept in the same transactions as the
// records, serve GET /v1/groups, the fingerprint filter of the listing,
// and the walks by time in sub-state. Three dimensions: the workflow type,
// which holds every tenant (value id 0 for those without one), the error
// fingerprint and the step, which hold the tenants that have one.
//
//   - group-values: dimension, 'v', value → value id (8 bytes), and
//     dimension, 'i', value id → tenants (8 bytes, big-endian) and the
//     value. Ids come from the bucket's sequence and are never reused; both
//     entries are deleted with the value's last tenant.
//   - group-counts: dimension, sub-state code, provider code, error flag,
//     value id → tenants (8 bytes, big-endian): a cell. A cell is deleted
//     when it counts none. The cells of the workflow type dimension count
//     every tenant, so they also count by sub-state and by provider.
//   - group-members: dimension, value id, sub-state code, provider code,
//     error flag, since (12 bytes), tenant id → nil. The members of a cell
//     are one key range, ordered by when they entered their sub-state: its
//     first and last keys are the cell's longest- and shortest-standing
//     tenants.
var (
	bucketGroupValues  = []byte("group-values")
	bucketGroupCounts  = []byte("group-counts")
	bucketGroupMembers = []byte("group-members")
)

// Dimensions of the group buckets.
const (
	dimType        = 0 // every tenant, by workflow type
	dimFingerprint = 1
	dimStep        = 2
	dimCount       = 3
)

// dimOf is the dimension whose cells count the groups of g, and whether
// its values are g's (false: g is the cells' sub-state or provider).
func dimOf(g substate.GroupBy) (byte, bool) {
	switch g {
	case substate.GroupByFingerprint:
		return dimFingerprint, true
	case substate.GroupByStep:
		return dimStep, true
	case substate.GroupByWorkflowType:
		return dimType, true
	}
	return dimType, false
}

// dimValue is a view's value of a dimension.
func dimValue(v *substate.TenantView, dim byte) string {
	switch dim {
	case dimFingerprint:
		return v.WorkflowErrorFingerprint
	case dimStep:
		return v.WorkflowStep
	}
	return v.WorkflowType
}

// Provider codes in group keys.
const (
	codeEngine        = 1
	codeStepFunctions = 2
	codeRestate       = 3
	lastProviderCode  = codeRestate
)

func providerCode(p substate.Provider) byte {
	switch p {
	case substate.ProviderEngine:
		return codeEngine
	case substate.ProviderStepFunctions:
		return codeStepFunctions
	case substate.ProviderRestate:
		return codeRestate
	}
	return 0
}

func providerOf(code byte) substate.Provider {
	switch code {
	case codeEngine:
		return substate.ProviderEngine
	case codeStepFunctions:
		return substate.ProviderStepFunctions
	case codeRestate:
		return substate.ProviderRestate
	}
	return ""
}

// cell is what a tenant's place in one dimension depends on besides its
// id: the cell's sub-state, provider and error flag.
type cell struct {
	ss, prov, err byte
}

func cellOf(v *substate.TenantView) cell {
	c := cell{ss: subStateCode(v.WorkflowSubState), prov: providerCode(v.Provider)}
	if v.WorkflowErrorMessage != "" {
		c.err = 1
	}
	return c
}

// valueID is the id of a value; 0 is no workflow type.
type valueID uint64

// place is a tenant's position in one dimension.
type place struct {
	id    valueID
	c     cell
	since time.Time
}

// Lengths of group keys.
const (
	sinceLen   = 12                             // seconds since year 0 (8 bytes), nanoseconds (4 bytes)
	cellLen    = 3                              // sub-state, provider, error flag
	idLen      = 8                              // value id
	memberHead = 1 + idLen + cellLen + sinceLen // a member key before the tenant id
	countLen   = 1 + cellLen + idLen            // a cell's key
)

// appendSince appends t as 12 bytes that sort in time order: seconds
// since year 0 and nanoseconds.
func appendSince(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()-minUnix))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

// sinceAt reads the 12 bytes appendSince wrote.
func sinceAt(b []byte) time.Time {
	sec := int64(binary.BigEndian.Uint64(b)) + minUnix
	return time.Unix(sec, int64(binary.BigEndian.Uint32(b[8:]))).UTC() // the zero time comes back as time.Time{}
}

// cellPrefix is the members key prefix of the cell c of value id in dim.
func cellPrefix(dim byte, id valueID, c cell) []byte {
	b := make([]byte, 0, 1+idLen+cellLen)
	b = append(b, dim)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	return append(b, c.ss, c.prov, c.err)
}

// memberKey is the group-members key of a tenant at p in dim.
func memberKey(dim byte, p place, tenant string) []byte {
	return appendMemberKey(make([]byte, 0, memberHead+len(tenant)), dim, p, tenant)
}

func appendMemberKey(b []byte, dim byte, p place, tenant string) []byte {
	b = append(b, dim)
	b = binary.BigEndian.AppendUint64(b, uint64(p.id))
	b = append(b, p.c.ss, p.c.prov, p.c.err)
	b = appendSince(b, p.since)
	return append(b, tenant...)
}

// memberTenant returns the tenant id and since of a member key.
func memberTenant(k []byte) (string, time.Time, bool) {
	if len(k) <= memberHead {
		return "", time.Time{}, false
	}
	return string(k[memberHead:]), sinceAt(k[memberHead-sinceLen:]), true
}

// countKey is the group-counts key of the cell c of value id in dim.
func countKey(dim byte, c cell, id valueID) []byte {
	b := make([]byte, 0, countLen)
	b = append(b, dim, c.ss, c.prov, c.err)
	return binary.BigEndian.AppendUint64(b, uint64(id))
}

// idKey is the group-values key of value id in dim; its value is the
// value's tenants and the value.
func idKey(dim byte, id valueID) []byte {
	return binary.BigEndian.AppendUint64([]byte{dim, 'i'}, uint64(id))
}

// nameKey is the group-values key of value in dim; its value is the id.
func nameKey(dim byte, value string) []byte {
	return append([]byte{dim, 'v'}, value...)
}

// encodeCount and decodeCount are the 8-byte big-endian counters.
func encodeCount(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(max(n, 0))) }

func decodeCount(v []byte) int64 {
	if len(v) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}
