package state

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// Buckets of the view file.
var (
	bucketTenants  = []byte("tenants")      // tenant id → record
	bucketSubState = []byte("by-sub-state") // sub-state code, tenant id → nil
	bucketError    = []byte("with-error")   // tenant id → nil, tenants with an error message
	bucketRetry    = []byte("by-retry")     // retry count (8 bytes, big-endian), tenant id → nil
	bucketMeta     = []byte("meta")         // see keyCheckpoint, keySchema
)

// Keys of the meta bucket.
var (
	keyCheckpoint = []byte("checkpoint") // last applied stream sequence, 8 bytes big-endian
	keySchema     = []byte("schema")     // schemaVersion, one byte
)

// Schema versions: the layout of buckets and keys. Open migrates a file of
// version 1, which has no group buckets, and refuses any other.
const (
	schemaVersion1 = 1
	schemaVersion  = 2
)

// An index key is at most 8 bytes and a tenant id: every valid tenant id
// fits (this fails to compile if substate.MaxTenantIDBytes ever outgrows
// bbolt's key size).
const _ = uint(bolt.MaxKeySize - 8 - substate.MaxTenantIDBytes)

// Sub-state codes in the sub-state index. The non-terminal sub-states are
// 1 to 4 so that one contiguous key range serves Active.
const (
	codeRunning     = 1
	codeWaiting     = 2
	codeBackingOff  = 3
	codeError       = 4
	codeSucceeded   = 5
	codeFailed      = 6
	lastActiveCode  = codeError
	firstActiveCode = codeRunning
)

func subStateCode(s substate.SubState) byte {
	switch s {
	case substate.StateRunning:
		return codeRunning
	case substate.StateWaiting:
		return codeWaiting
	case substate.StateBackingOff:
		return codeBackingOff
	case substate.StateError:
		return codeError
	case substate.StateSucceeded:
		return codeSucceeded
	case substate.StateFailed:
		return codeFailed
	}
	return 0
}

func subStateOf(code byte) substate.SubState {
	if code < codeRunning || code > codeFailed {
		return ""
	}
	return substate.SubStates[code-1]
}

func subStateKey(s substate.SubState, id string) []byte {
	return append(append(make([]byte, 0, 1+len(id)), subStateCode(s)), id...)
}

func retryKey(n int, id string) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(max(n, 0))), id...)
}

// indexKeys are the keys a record has in the three indexes; errorKey is
// nil when the record has no error message.
type indexKeys struct {
	subState, errorKey, retry []byte
}

func keysOf(v *substate.TenantView) indexKeys {
	k := indexKeys{
		subState: subStateKey(v.WorkflowSubState, v.TenantID),
		retry:    retryKey(v.WorkflowRetryCount, v.TenantID),
	}
	if v.WorkflowErrorMessage != "" {
		k.errorKey = []byte(v.TenantID)
	}
	return k
}

// buckets are the write transaction's handles on the view's buckets.
type buckets struct {
	tenants, subState, errors, retry, meta *bolt.Bucket
	updated                                *bolt.Bucket      // see derived.go
	moved                                  [codeFailed]int64 // count changes by sub-state, not saved yet (saveCounts)
	values, counts, members                *bolt.Bucket      // see groupkeys.go
	groups                                 *groupWork        // group count changes, not saved yet (saveGroups)
	deadlines, stuck, stuckCounts          *bolt.Bucket      // see deadline.go
	stuckMoved                             map[string]int64  // stuck count changes, not saved yet (saveStuckCounts)
}

func bucketsOf(tx *bolt.Tx) buckets {
	return buckets{
		tenants:     tx.Bucket(bucketTenants),
		subState:    tx.Bucket(bucketSubState),
		errors:      tx.Bucket(bucketError),
		retry:       tx.Bucket(bucketRetry),
		meta:        tx.Bucket(bucketMeta),
		updated:     tx.Bucket(bucketUpdated),
		values:      tx.Bucket(bucketGroupValues),
		counts:      tx.Bucket(bucketGroupCounts),
		members:     tx.Bucket(bucketGroupMembers),
		deadlines:   tx.Bucket(bucketDeadlines),
		stuck:       tx.Bucket(bucketStuck),
		stuckCounts: tx.Bucket(bucketStuckCounts),
	}
}

// put stores next and moves its index entries from where old had them; old
// is nil for a tenant not stored yet.
func (b *buckets) put(old *Record, next *Record) error {
	if err := b.tenants.Put([]byte(next.View.TenantID), encodeRecord(next)); err != nil {
		return err
	}
	nk := keysOf(&next.View)
	var ok indexKeys
	if old != nil {
		ok = keysOf(&old.View)
	}
	if err := move(b.subState, ok.subState, nk.subState); err != nil {
		return err
	}
	if err := move(b.errors, ok.errorKey, nk.errorKey); err != nil {
		return err
	}
	if err := move(b.retry, ok.retry, nk.retry); err != nil {
		return err
	}
	if err := b.trackDerived(old, next); err != nil {
		return err
	}
	if err := b.trackDeadlines(old, next); err != nil {
		return err
	}
	return b.trackGroups(old, next)
}

// move replaces index key from with to; either may be nil.
func move(b *bolt.Bucket, from, to []byte) error {
	if bytes.Equal(from, to) {
		return nil
	}
	if from != nil {
		if err := b.Delete(from); err != nil {
			return err
		}
	}
	if to == nil {
		return nil
	}
	return b.Put(to, nil)
}
