package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// The deadline indexes, kept in the same transactions as the records:
//
//   - deadlines: the timer index, deadline (12 bytes, see appendSince),
//     tenant id → the SLO it is for (deadlineByte), for every tenant with
//     a deadline that is not stuck yet; its first key is the next
//     deadline to pass;
//   - stuck: stuck since (12 bytes), tenant id → nil, for every stuck
//     tenant, the longest stuck first;
//   - stuck-counts: sub-state code, provider code, workflow type →
//     tenants (8 bytes, big-endian): how many stuck tenants each
//     combination has, for the metric and the console's counts.
//
// The record holds the deadline and its SLO too (deadlineByte), so a
// reader of the index needs the record only to act.
var (
	bucketDeadlines   = []byte("deadlines")
	bucketStuck       = []byte("stuck")
	bucketStuckCounts = []byte("stuck-counts")
	keySLODigest      = []byte("slo-digest") // meta: the SLOs the deadlines were set with (substate.SLOs.Digest)
)

// deadlineByte is the stored form of a view's SLO and stuck flag: the
// SLO's position in substate.SLONames plus one, and 0x80 when stuck.
func deadlineByte(v *substate.TenantView) byte {
	var b byte
	for i, s := range substate.SLONames {
		if s == v.DeadlineSLO {
			b = byte(i + 1)
		}
	}
	if v.Stuck {
		b |= 0x80
	}
	return b
}

// setDeadlineByte sets v's SLO, stuck flag and stuck since (its deadline)
// from b, and reports whether b is one deadlineByte writes.
func setDeadlineByte(v *substate.TenantView, b byte) bool {
	code := int(b &^ 0x80)
	if code < 1 || code > len(substate.SLONames) {
		return false
	}
	v.DeadlineSLO = substate.SLONames[code-1]
	if v.Stuck = b&0x80 != 0; v.Stuck {
		v.StuckSince = v.Deadline
	}
	return true
}

// setDeadline sets next's deadline under slos, from its sub-state's start
// and its execution's, and carries old's stuck state over when the
// deadline is the one old missed: a change that moves the deadline (a new
// sub-state or execution, the end, another workflow type) ends stuck.
// old is the record before the change.
func setDeadline(slos *substate.SLOs, old, next *Record) {
	v := &next.View
	v.Deadline, v.DeadlineSLO = deadlineUnder(slos, next)
	o := &old.View
	v.Stuck = o.Stuck && v.Deadline.Equal(o.Deadline) && v.DeadlineSLO == o.DeadlineSLO
	v.StuckSince = time.Time{}
	if v.Stuck {
		v.StuckSince = o.StuckSince
	}
}

// deadlineUnder is the deadline slos set rec, and its SLO: none when it
// would fall after the year 9999.
func deadlineUnder(slos *substate.SLOs, rec *Record) (time.Time, substate.SLO) {
	v := &rec.View
	at, slo := slos.Deadline(v.WorkflowType, v.WorkflowSubState, v.WorkflowSubStateSince, rec.StartedAt)
	if at.IsZero() || !storable(at) {
		return time.Time{}, ""
	}
	return utc(at), slo
}

// deadlineKey is v's key in the timer index, nil when it has none there
// (no deadline, or stuck).
func (b *buckets) deadlineKey(v *substate.TenantView) []byte {
	if v.Deadline.IsZero() || v.Stuck {
		return nil
	}
	return b.cut(append(appendSince(b.arena, v.Deadline), v.TenantID...))
}

// stuckKey is v's key in the stuck index, nil when it is not stuck.
func (b *buckets) stuckKey(v *substate.TenantView) []byte {
	if !v.Stuck {
		return nil
	}
	return b.cut(append(appendSince(b.arena, v.StuckSince), v.TenantID...))
}

// stuckCountKey is the stuck-counts key of a stuck view.
func stuckCountKey(v *substate.TenantView) string {
	return string(append([]byte{subStateCode(v.WorkflowSubState), providerCode(v.Provider)}, v.WorkflowType...))
}

// trackDeadlines moves next's keys in the timer and stuck indexes from
// where old had them, and counts a stuck tenant that came or went in
// b.stuck; old is nil for a tenant not stored yet.
func (b *buckets) trackDeadlines(old, next *Record) error {
	var ov *substate.TenantView
	if old != nil {
		ov = &old.View
	}
	nv := &next.View
	if (ov == nil || ov.Deadline.IsZero()) && nv.Deadline.IsZero() {
		return nil // no deadline before or after, so in neither index: the case without SLOs
	}
	var fromD, fromS []byte
	if ov != nil {
		fromD, fromS = b.deadlineKey(ov), b.stuckKey(ov)
	}
	if toD := b.deadlineKey(nv); !bytes.Equal(fromD, toD) || (toD != nil && ov.DeadlineSLO != nv.DeadlineSLO) {
		if fromD != nil {
			if err := b.deadlines.Delete(fromD); err != nil {
				return err
			}
		}
		if toD != nil {
			if err := b.deadlines.Put(toD, []byte{deadlineByte(nv)}); err != nil {
				return err
			}
		}
	}
	if err := move(&b.stuck, fromS, b.stuckKey(nv)); err != nil {
		return err
	}
	var from, to string
	if ov != nil && ov.Stuck {
		from = stuckCountKey(ov)
	}
	if nv.Stuck {
		to = stuckCountKey(nv)
	}
	if from != to {
		if b.stuckMoved == nil {
			b.stuckMoved = map[string]int64{}
		}
		if from != "" {
			b.stuckMoved[from]--
		}
		if to != "" {
			b.stuckMoved[to]++
		}
	}
	return nil
}

// saveStuckCounts adds what the transaction's puts moved to the stored
// stuck counts, deleting a count that reaches none.
func (b *buckets) saveStuckCounts() error {
	for k, d := range b.stuckMoved {
		if d == 0 {
			continue
		}
		key := []byte(k)
		n := decodeCount(b.stuckCounts.Get(key)) + d
		var err error
		if n <= 0 {
			err = b.stuckCounts.Delete(key)
		} else {
			err = b.stuckCounts.Put(key, encodeCount(n))
		}
		if err != nil {
			return err
		}
	}
	b.stuckMoved = nil
	return nil
}

// firstDeadline returns the earliest deadline in the timer index, zero
// when there is none.
func firstDeadline(tx *bolt.Tx) time.Time {
	k, _ := tx.Bucket(bucketDeadlines).Cursor().First()
	if len(k) < sinceLen {
		return time.Time{}
	}
	return sinceAt(k)
}

// deadlineTenant returns the deadline and tenant id of a timer index key.
func deadlineTenant(k []byte) (time.Time, string, bool) {
	if len(k) <= sinceLen {
		return time.Time{}, "", false
	}
	return sinceAt(k), string(k[sinceLen:]), true
}

// dueBefore reports whether a timer index key's deadline is at or before
// now.
func dueBefore(k []byte, now time.Time) bool {
	return len(k) >= sinceLen && bytes.Compare(k[:sinceLen], appendSince(nil, now)) <= 0
}

// stuckCountOf decodes a stuck-counts entry.
func stuckCountOf(k, v []byte) (substate.StuckCount, bool) {
	if len(k) < 2 || len(v) != 8 {
		return substate.StuckCount{}, false
	}
	return substate.StuckCount{SubState: subStateOf(k[0]), Provider: providerOf(k[1]), WorkflowType: string(k[2:]),
		Count: int64(binary.BigEndian.Uint64(v))}, true
}

// StuckCounts returns how many tenants are stuck, by sub-state, provider
// and workflow type, as committed: a walk over counters the view keeps in
// the same transactions as its records, one per combination that has a
// stuck tenant.
func (d *DB) StuckCounts(ctx context.Context) ([]substate.StuckCount, error) {
	var out []substate.StuckCount
	err := d.read(ctx, "read stuck counts", func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStuckCounts).ForEach(func(k, v []byte) error {
			c, ok := stuckCountOf(k, v)
			if !ok {
				return fmt.Errorf("stuck count %x is not one", k)
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
