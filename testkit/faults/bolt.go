package faults

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Garbage returns n pseudo-random bytes, the same for the same seed.
func Garbage(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// BoltBucketRoot returns the root page of the top-level bucket name in the
// closed bbolt file at path: a page every read and write of that bucket
// goes through. An inline bucket (small enough to live in its parent's
// page) has no page of its own and is an error.
func BoltBucketRoot(path, bucket string) (uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var root uint64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("no bucket %q in %s", bucket, path)
		}
		if root = uint64(b.RootPage()); root == 0 {
			return fmt.Errorf("bucket %q in %s is inline: it has no page of its own", bucket, path)
		}
		return nil
	})
	return root, err
}

// CorruptBoltPage overwrites page pgid of the bbolt file at path with a
// page of garbage (seeded by pgid) and fsyncs it, as a failing disk or a
// stray write would. It works on a file a process has open: bbolt maps the
// file shared, so that process reads the garbage on its next access.
func CorruptBoltPage(path string, pgid uint64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := boltPageSize(f)
	if err != nil {
		return fmt.Errorf("corrupt page %d of %s: %w", pgid, path, err)
	}
	if _, err := f.WriteAt(Garbage(size, pgid), int64(pgid)*int64(size)); err != nil {
		return fmt.Errorf("corrupt page %d of %s: %w", pgid, path, err)
	}
	return f.Sync()
}

// boltMagic is the magic number of a bbolt meta page.
const boltMagic = 0xED0CDAED

// boltPageSize reads the page size from the first meta page of a bbolt
// file: after the 16-byte page header come the magic number, the version
// and the page size, each 4 bytes in the machine's byte order (little
// endian on every platform substate builds for).
func boltPageSize(f *os.File) (int, error) {
	var meta [28]byte
	if _, err := f.ReadAt(meta[:], 0); err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(meta[16:]) != boltMagic {
		return 0, errors.New("not a bbolt file (no magic number in page 0)")
	}
	return int(binary.LittleEndian.Uint32(meta[24:])), nil
}
