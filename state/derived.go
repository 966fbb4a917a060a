package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// The operator console's index and counters, kept with the three query
// indexes in the same transactions:
//
//   - by-updated: UpdatedAt (8 bytes, big-endian Unix nanoseconds), tenant
//     id → nil, so "last updated first" is a walk from the end;
//   - the meta key counts: how many tenants each sub-state has, so the
//     console's counts cost one read however large the view is.
//
// A file written before they existed gets them on Open, built once from
// the records and the sub-state index.
var (
	bucketUpdated = []byte("by-updated")
	keyCounts     = []byte("counts") // 8 bytes per sub-state code 1..6, big-endian
)

func updatedKey(v *substate.TenantView) []byte {
	return appendUpdatedKey(make([]byte, 0, 8+len(v.TenantID)), v)
}

func appendUpdatedKey(b []byte, v *substate.TenantView) []byte {
	ns := uint64(0)
	if !v.UpdatedAt.IsZero() && v.UpdatedAt.UnixNano() > 0 {
		ns = uint64(v.UpdatedAt.UnixNano())
	}
	return append(binary.BigEndian.AppendUint64(b, ns), v.TenantID...)
}

// trackDerived moves next's by-updated key from where old had it, and
// its sub-state count in b.moved; old is nil for a tenant not stored yet.
func (b *buckets) trackDerived(old, next *Record) error {
	var from []byte
	var oldCode byte
	if old != nil {
		from, oldCode = b.cut(appendUpdatedKey(b.arena, &old.View)), subStateCode(old.View.WorkflowSubState)
	}
	if err := move(&b.updated, from, b.cut(appendUpdatedKey(b.arena, &next.View))); err != nil {
		return err
	}
	if newCode := subStateCode(next.View.WorkflowSubState); newCode != oldCode {
		if oldCode > 0 {
			b.moved[oldCode-1]--
		}
		if newCode > 0 {
			b.moved[newCode-1]++
		}
	}
	return nil
}

// saveCounts adds what the transaction's puts moved to the stored counts:
// one write of the counter per commit, however many tenants moved.
func (b *buckets) saveCounts() error {
	if b.moved == ([codeFailed]int64{}) {
		return nil
	}
	counts := decodeCounts(b.meta.Get(keyCounts))
	for i, d := range b.moved {
		counts[i] = max(counts[i]+d, 0)
	}
	b.moved = [codeFailed]int64{}
	return b.meta.Put(keyCounts, encodeCounts(counts))
}

func decodeCounts(v []byte) [codeFailed]int64 {
	var c [codeFailed]int64
	for i := range c {
		if len(v) >= 8*(i+1) {
			c[i] = int64(binary.BigEndian.Uint64(v[8*i:]))
		}
	}
	return c
}

func encodeCounts(c [codeFailed]int64) []byte {
	b := make([]byte, 0, 8*len(c))
	for _, n := range c {
		b = binary.BigEndian.AppendUint64(b, uint64(max(n, 0)))
	}
	return b
}

// initDerived creates the by-updated index and the counts when the file
// has none, from what the file holds.
func initDerived(tx *bolt.Tx) error {
	if tx.Bucket(bucketUpdated) == nil {
		upd, err := tx.CreateBucket(bucketUpdated)
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
			rec, err := decodeRecord(string(k), v)
			if err != nil {
				return fmt.Errorf("tenant %q: %w", k, err)
			}
			return upd.Put(updatedKey(&rec.View), nil)
		})
		if err != nil {
			return fmt.Errorf("build %s index: %w", bucketUpdated, err)
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyCounts) != nil {
		return nil
	}
	var counts [codeFailed]int64
	err := tx.Bucket(bucketSubState).ForEach(func(k, _ []byte) error {
		if len(k) > 0 && k[0] >= codeRunning && k[0] <= codeFailed {
			counts[k[0]-1]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	return meta.Put(keyCounts, encodeCounts(counts))
}

// Counts returns how many tenants each sub-state has, as committed: one
// read of a counter the projector keeps, whatever the view's size.
func (d *DB) Counts(ctx context.Context) (map[substate.SubState]int64, error) {
	var c [codeFailed]int64
	err := d.read(ctx, "read counts", func(tx *bolt.Tx) error {
		c = decodeCounts(tx.Bucket(bucketMeta).Get(keyCounts))
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[substate.SubState]int64, len(c))
	for i, n := range c {
		out[subStateOf(byte(i+1))] = n
	}
	return out, nil
}

// DefaultScanLimit is how many index keys one listing reads at most when
// the DB's ScanLimit is 0.
const DefaultScanLimit = 100_000

// errSortTwice is the answer to a filter that asks for two orders.
var errSortTwice = errors.New("sort by retry count or by last update, not both")

// updatedScan walks the by-updated index from the newest change down.
func updatedScan() scan {
	return scan{kind: kindUpdatedDown, bucket: bucketUpdated, desc: true, id: afterRetry}
}
