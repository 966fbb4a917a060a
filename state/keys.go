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

func appendSubStateKey(b []byte, s substate.SubState, id string) []byte {
	return append(append(b, subStateCode(s)), id...)
}

func retryKey(n int, id string) []byte {
	return appendRetryKey(make([]byte, 0, 8+len(id)), n, id)
}

func appendRetryKey(b []byte, n int, id string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(max(n, 0))), id...)
}

// indexKeys are the keys a record has in the three indexes; errorKey is
// nil when the record has no error message.
type indexKeys struct {
	subState, errorKey, retry []byte
}

func (b *buckets) keysOf(v *substate.TenantView) indexKeys {
	k := indexKeys{
		subState: b.cut(appendSubStateKey(b.arena, v.WorkflowSubState, v.TenantID)),
		retry:    b.cut(appendRetryKey(b.arena, v.WorkflowRetryCount, v.TenantID)),
	}
	if v.WorkflowErrorMessage != "" {
		k.errorKey = b.cut(append(b.arena, v.TenantID...))
	}
	return k
}

// cut returns the key just appended to b.arena (key is that append) and
// keeps it there, capped so that the next key appended cannot write over
// it. The arena holds the keys of one tenant's put (see put); an append
// that outgrew it copied it, and the keys cut before keep the array they
// are in.
func (b *buckets) cut(key []byte) []byte {
	start := len(b.arena)
	b.arena = key
	return key[start:len(key):len(key)]
}

// buckets are the write transaction's handles on the view's buckets.
type buckets struct {
	tenants, subState, errors, retry, meta keyed
	updated                                keyed             // see derived.go
	moved                                  [codeFailed]int64 // count changes by sub-state, not saved yet (saveCounts)
	values, counts, members                keyed             // see groupkeys.go
	groups                                 *groupWork        // group count changes, not saved yet (saveGroups)
	deadlines, stuck, stuckCounts          keyed             // see deadline.go
	stuckMoved                             map[string]int64  // stuck count changes, not saved yet (saveStuckCounts)
	// arena holds the index keys of the put under way: bbolt copies a key
	// it stores and only searches with one it deletes, so a put's keys
	// can share one buffer, and the next put reuses it.
	arena []byte
}

func bucketsOf(tx *bolt.Tx) buckets {
	return buckets{
		tenants:     keyedOf(tx.Bucket(bucketTenants)),
		subState:    keyedOf(tx.Bucket(bucketSubState)),
		errors:      keyedOf(tx.Bucket(bucketError)),
		retry:       keyedOf(tx.Bucket(bucketRetry)),
		meta:        keyedOf(tx.Bucket(bucketMeta)),
		updated:     keyedOf(tx.Bucket(bucketUpdated)),
		values:      keyedOf(tx.Bucket(bucketGroupValues)),
		counts:      keyedOf(tx.Bucket(bucketGroupCounts)),
		members:     keyedOf(tx.Bucket(bucketGroupMembers)),
		deadlines:   keyedOf(tx.Bucket(bucketDeadlines)),
		stuck:       keyedOf(tx.Bucket(bucketStuck)),
		stuckCounts: keyedOf(tx.Bucket(bucketStuckCounts)),
	}
}

// put stores next and moves its index entries from where old had them; old
// is nil for a tenant not stored yet.
func (b *buckets) put(old *Record, next *Record) error {
	b.arena = b.arena[:0]
	if err := b.tenants.Put(b.cut(append(b.arena, next.View.TenantID...)), encodeRecord(next)); err != nil {
		return err
	}
	nk := b.keysOf(&next.View)
	var ok indexKeys
	if old != nil {
		ok = b.keysOf(&old.View)
	}
	if err := move(&b.subState, ok.subState, nk.subState); err != nil {
		return err
	}
	if err := move(&b.errors, ok.errorKey, nk.errorKey); err != nil {
		return err
	}
	if err := move(&b.retry, ok.retry, nk.retry); err != nil {
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
func move(b *keyed, from, to []byte) error {
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
