package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A keyed bucket answers Get and Delete as bbolt's own do, on keys before,
// between and after the stored ones (across pages and the nodes a write
// transaction has changed), on a nested bucket's name, and with Puts in
// between that its reused cursor has not seen: the same operations on two
// buckets, one through bbolt and one keyed, leave the same answers and the
// same contents.
func TestKeyedAnswersAsBucket(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "keyed.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	value := bytes.Repeat([]byte("v"), 100) // several pages of keys
	fill := func(b *bolt.Bucket) {
		for i := 0; i < 4000; i += 2 {
			if err := b.Put(key(i), value); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.CreateBucket(key(1)); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 3 {
		err := db.Update(func(tx *bolt.Tx) error {
			ref, err := tx.CreateBucketIfNotExists([]byte("ref"))
			if err != nil {
				return err
			}
			kb, err := tx.CreateBucketIfNotExists([]byte("keyed"))
			if err != nil {
				return err
			}
			if round == 0 {
				fill(ref)
				fill(kb)
			}
			k := keyedOf(kb)
			for op := range 20000 {
				i := rng.IntN(4100) - 50 // some keys sort before and after all
				kk := key(i)
				if i < 0 {
					kk = []byte{'a', byte(-i)}
				}
				switch rng.IntN(3) {
				case 0:
					if got, want := k.Get(kk), ref.Get(kk); !bytes.Equal(got, want) || (got == nil) != (want == nil) {
						t.Fatalf("round %d op %d: Get(%q) = %q, bbolt %q", round, op, kk, got, want)
					}
				case 1:
					if got, want := k.Delete(kk), ref.Delete(kk); !errors.Is(got, want) {
						t.Fatalf("round %d op %d: Delete(%q) = %v, bbolt %v", round, op, kk, got, want)
					}
				case 2:
					if i == 1 {
						continue // the nested bucket
					}
					if err := errors.Join(k.Put(kk, value), ref.Put(kk, value)); err != nil {
						t.Fatal(err)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.View(func(tx *bolt.Tx) error {
		a, b := tx.Bucket([]byte("ref")).Cursor(), tx.Bucket([]byte("keyed")).Cursor()
		ka, va := a.First()
		kb, vb := b.First()
		for ; ka != nil || kb != nil; ka, va, kb, vb = nextBoth(a, b) {
			if !bytes.Equal(ka, kb) || !bytes.Equal(va, vb) {
				t.Fatalf("contents differ: %q=%q against %q=%q", ka, va, kb, vb)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		k := keyedOf(tx.Bucket([]byte("keyed")))
		if err := k.Delete(key(1)); !errors.Is(err, bolterrors.ErrIncompatibleValue) {
			t.Errorf("Delete of a nested bucket's name = %v, want %v", err, bolterrors.ErrIncompatibleValue)
		}
		if v := k.Get(key(1)); v != nil {
			t.Errorf("Get of a nested bucket's name = %q, want nil", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func nextBoth(a, b *bolt.Cursor) (ka, va, kb, vb []byte) {
	ka, va = a.Next()
	kb, vb = b.Next()
	return ka, va, kb, vb
}
