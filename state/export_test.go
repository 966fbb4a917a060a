package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Internals the external tests use.
var (
	EncodeRecord = func(r Record) []byte { return encodeRecord(&r) }
	DecodeRecord = decodeRecord
	DecodeToken  = func(s string) (kind byte, query uint32, key []byte, err error) {
		t, err := decodeToken(s)
		return t.kind, t.query, t.key, err
	}
	EncodeToken = func(kind byte, query uint32, key []byte) string {
		return encodeToken(pageToken{kind: kind, query: query, key: key})
	}
)

// PageWrites returns how many pages the committed write transactions wrote
// since Open, by bbolt's own count: it moves with every commit, even one
// that changed nothing, so it checks Stats.Commits from below.
func (d *DB) PageWrites() int64 {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	st := d.db.Stats()
	return st.TxStats.GetWrite()
}

// Verify checks a closed view file: bbolt's own consistency check, then
// that every record decodes and the three indexes hold exactly the keys
// its records imply.
func Verify(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if err := verifyIndexes(tx); err != nil {
			return err
		}
		if err := verifyDerived(tx); err != nil {
			return err
		}
		if err := verifyDeadlines(tx); err != nil {
			return err
		}
		return verifyGroups(tx)
	})
}

func verifyIndexes(tx *bolt.Tx) error {
	want := map[string][][]byte{}
	err := tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return fmt.Errorf("tenant %q: %w", k, err)
		}
		ks := new(buckets).keysOf(&rec.View)
		want[string(bucketSubState)] = append(want[string(bucketSubState)], ks.subState)
		want[string(bucketRetry)] = append(want[string(bucketRetry)], ks.retry)
		if ks.errorKey != nil {
			want[string(bucketError)] = append(want[string(bucketError)], ks.errorKey)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketSubState, bucketRetry, bucketError} {
		got := map[string]bool{}
		tx.Bucket(name).ForEach(func(k, _ []byte) error { got[string(k)] = true; return nil })
		for _, k := range want[string(name)] {
			if !got[string(k)] {
				return fmt.Errorf("index %s lacks %q", name, k)
			}
			delete(got, string(k))
		}
		for k := range got {
			return fmt.Errorf("index %s has stray key %q", name, k)
		}
	}
	return nil
}

// verifyDerived checks the by-updated index and the sub-state counts
// against the records.
func verifyDerived(tx *bolt.Tx) error {
	want := map[string]bool{}
	var counts [codeFailed]int64
	err := tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return err
		}
		want[string(updatedKey(&rec.View))] = true
		if c := subStateCode(rec.View.WorkflowSubState); c > 0 {
			counts[c-1]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := 0
	err = tx.Bucket(bucketUpdated).ForEach(func(k, _ []byte) error {
		if n++; !want[string(k)] {
			return fmt.Errorf("index %s has stray key %q", bucketUpdated, k)
		}
		return nil
	})
	if err == nil && n != len(want) {
		err = fmt.Errorf("index %s has %d keys, want %d", bucketUpdated, n, len(want))
	}
	if got := decodeCounts(tx.Bucket(bucketMeta).Get(keyCounts)); err == nil && got != counts {
		err = fmt.Errorf("counts %v, want %v", got, counts)
	}
	return err
}

// OutboxInFile returns how many changes the outbox bucket of the file
// holds, those the feed removed but no commit has deleted yet included.
func (d *DB) OutboxInFile() int {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	var n int
	_ = d.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketOutbox).Stats().KeyN
		return nil
	})
	return n
}

// verifyGroups checks the group buckets against what the records imply:
// the same members, cells and value counts, ids aside (ids depend on the
// order values first appeared in).
func verifyGroups(tx *bolt.Tx) error {
	g := newGroupBuild()
	var keys [][]byte
	err := tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return err
		}
		keys = g.add(&rec.View, keys)
		return nil
	})
	if err != nil {
		return err
	}
	stored, err := storedValues(tx)
	if err != nil {
		return err
	}
	named := func(dim byte, id valueID, names map[dimID]string) string {
		if id == 0 {
			return "-"
		}
		return fmt.Sprintf("%q", names[dimID{dim, id}])
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[memberString(k, func(d byte, id valueID) string { return named(d, id, g.names) })] = true
	}
	err = tx.Bucket(bucketGroupMembers).ForEach(func(k, _ []byte) error {
		s := memberString(k, func(d byte, id valueID) string { return named(d, id, stored.names) })
		if !want[s] {
			return fmt.Errorf("group members have stray key %s", s)
		}
		delete(want, s)
		return nil
	})
	for s := range want {
		return fmt.Errorf("group members lack %s", s)
	}
	if err != nil {
		return err
	}
	wantCells := map[string]int64{}
	for ref, n := range g.counts {
		wantCells[fmt.Sprintf("%d/%s/%v", ref.dim, named(ref.dim, ref.id, g.names), ref.c)] = n
	}
	err = tx.Bucket(bucketGroupCounts).ForEach(func(k, v []byte) error {
		ref := cellRef{dim: k[0], c: cell{k[1], k[2], k[3]}, id: valueID(binary.BigEndian.Uint64(k[4:]))}
		s := fmt.Sprintf("%d/%s/%v", ref.dim, named(ref.dim, ref.id, stored.names), ref.c)
		if n := decodeCount(v); wantCells[s] != n {
			return fmt.Errorf("group cell %s counts %d, want %d", s, n, wantCells[s])
		}
		delete(wantCells, s)
		return nil
	})
	for s, n := range wantCells {
		return fmt.Errorf("group cell %s is missing, want %d", s, n)
	}
	if err != nil {
		return err
	}
	for ref, n := range g.values {
		sid, ok := stored.ids[dimName{ref.dim, g.names[ref]}]
		if !ok || stored.counts[dimID{ref.dim, sid}] != n {
			return fmt.Errorf("group value %q of dimension %d: stored with %d tenants, want %d", g.names[ref], ref.dim, stored.counts[dimID{ref.dim, sid}], n)
		}
	}
	if len(stored.ids) != len(g.values) {
		return fmt.Errorf("%d group values stored, want %d", len(stored.ids), len(g.values))
	}
	return nil
}

type valueIndex struct {
	ids    map[dimName]valueID
	names  map[dimID]string
	counts map[dimID]int64
}

// storedValues reads group-values, checking that its two halves agree.
func storedValues(tx *bolt.Tx) (valueIndex, error) {
	x := valueIndex{ids: map[dimName]valueID{}, names: map[dimID]string{}, counts: map[dimID]int64{}}
	err := tx.Bucket(bucketGroupValues).ForEach(func(k, v []byte) error {
		switch {
		case len(k) >= 2 && k[1] == 'v' && len(v) == idLen:
			x.ids[dimName{k[0], string(k[2:])}] = valueID(binary.BigEndian.Uint64(v))
		case len(k) == 2+idLen && k[1] == 'i' && len(v) >= 8:
			ref := dimID{k[0], valueID(binary.BigEndian.Uint64(k[2:]))}
			x.names[ref], x.counts[ref] = string(v[8:]), decodeCount(v)
		default:
			return fmt.Errorf("group value entry %x = %x", k, v)
		}
		return nil
	})
	for name, id := range x.ids {
		if x.names[dimID{name.dim, id}] != name.value {
			return x, fmt.Errorf("group value %q of dimension %d names id %d, which names %q", name.value, name.dim, id, x.names[dimID{name.dim, id}])
		}
	}
	if err == nil && len(x.ids) != len(x.names) {
		err = fmt.Errorf("group values: %d names, %d ids", len(x.ids), len(x.names))
	}
	return x, err
}

// memberString describes a member key with its value instead of its id.
func memberString(k []byte, name func(dim byte, id valueID) string) string {
	dim, id, rest := k[0], valueID(binary.BigEndian.Uint64(k[1:])), k[1+idLen:]
	return fmt.Sprintf("%d/%s/%v/%s/%q", dim, name(dim, id), rest[:cellLen], sinceAt(rest[cellLen:]).Format(time.RFC3339Nano), rest[cellLen+sinceLen:])
}

// ForgetGroups moves a closed view file back to schema 1, as an earlier
// release left it, so that the next Open builds its group buckets again.
func ForgetGroups(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte{schemaVersion1}) })
	return errors.Join(err, db.Close())
}

// verifyDeadlines checks the timer and stuck indexes and the stuck counts
// against the records: a terminal tenant holds no deadline, a stuck one
// is in the stuck index alone.
func verifyDeadlines(tx *bolt.Tx) error {
	want := map[string]map[string]bool{string(bucketDeadlines): {}, string(bucketStuck): {}}
	counts := map[string]int64{}
	err := tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return err
		}
		view := &rec.View
		if view.WorkflowSubState.Terminal() && !view.Deadline.IsZero() {
			return fmt.Errorf("terminal tenant %q holds deadline %s", k, view.Deadline)
		}
		if dk := new(buckets).deadlineKey(view); dk != nil {
			want[string(bucketDeadlines)][string(dk)] = true
			if v := tx.Bucket(bucketDeadlines).Get(dk); len(v) != 1 || v[0] != deadlineByte(view) {
				return fmt.Errorf("timer index entry of %q says SLO %x, the record %q", k, v, view.DeadlineSLO)
			}
		}
		if sk := new(buckets).stuckKey(view); sk != nil {
			want[string(bucketStuck)][string(sk)] = true
			counts[stuckCountKey(view)]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketDeadlines, bucketStuck} {
		n := 0
		err := tx.Bucket(name).ForEach(func(k, _ []byte) error {
			if n++; !want[string(name)][string(k)] {
				return fmt.Errorf("index %s has stray key %x", name, k)
			}
			return nil
		})
		if err == nil && n != len(want[string(name)]) {
			err = fmt.Errorf("index %s has %d keys, want %d", name, n, len(want[string(name)]))
		}
		if err != nil {
			return err
		}
	}
	got := map[string]int64{}
	tx.Bucket(bucketStuckCounts).ForEach(func(k, v []byte) error { got[string(k)] = decodeCount(v); return nil })
	if !maps.Equal(got, counts) {
		return fmt.Errorf("stuck counts %v, want %v", got, counts)
	}
	return nil
}
