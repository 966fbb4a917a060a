package faults_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate/testkit/faults"
)

// boltFile writes a closed bbolt file whose bucket "b" spans many pages.
func boltFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		for i := 0; err == nil && i < 2000; i++ {
			err = b.Put(fmt.Appendf(nil, "key-%05d", i), bytes.Repeat([]byte{'v'}, 100))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// What bbolt does with a page of garbage: reading through it panics with
// a message naming the page, and tx.Check reports it.
func TestCorruptBoltPage(t *testing.T) {
	path := boltFile(t)
	root, err := faults.BoltBucketRoot(path, "b")
	if err != nil || root < 2 {
		t.Fatalf("root page %d, %v", root, err)
	}
	if err := faults.CorruptBoltPage(path, root); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bbolt refuses to open the file: %v (its meta pages are intact)", err)
	}
	defer db.Close()
	panicked := func() (r any) {
		defer func() { r = recover() }()
		_ = db.View(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).ForEach(func(k, v []byte) error { return nil }) })
		return nil
	}()
	if want := fmt.Sprintf("Page expected to be: %d", root); !strings.Contains(fmt.Sprint(panicked), want) {
		t.Fatalf("reading the bucket: panic %v, want one saying %q", panicked, want)
	}
	var found []string
	_ = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			found = append(found, err.Error())
		}
		return nil
	})
	if len(found) == 0 || !strings.Contains(strings.Join(found, "\n"), fmt.Sprint(root)) {
		t.Fatalf("tx.Check found %q, want page %d named", found, root)
	}
}

func TestBoltBucketRootErrors(t *testing.T) {
	path := boltFile(t)
	if _, err := faults.BoltBucketRoot(path, "missing"); err == nil {
		t.Error("no error for a missing bucket")
	}
	if err := faults.CorruptBoltPage(filepath.Join(t.TempDir(), "none.db"), 2); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestGarbageDeterministic(t *testing.T) {
	a, b, c := faults.Garbage(4096, 7), faults.Garbage(4096, 7), faults.Garbage(4096, 8)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Count(a, []byte{0}) > 100 {
		t.Fatal("Garbage is not deterministic per seed, or not garbage")
	}
}
