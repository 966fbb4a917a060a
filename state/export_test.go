package state

import (
	"errors"
	"fmt"
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
		return verifyDerived(tx)
	})
}

func verifyIndexes(tx *bolt.Tx) error {
	want := map[string][][]byte{}
	err := tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return fmt.Errorf("tenant %q: %w", k, err)
		}
		ks := keysOf(&rec.View)
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
