package state

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// keyed is a bucket whose reads and deletes of one key go through one
// cursor for the transaction. bbolt's Bucket.Get and Bucket.Delete make a
// new cursor for every call and grow its search stack from empty, two to
// four allocations a key, a tenth of what an applied event allocates; a
// cursor's Seek reuses the stack it grew. Put has no cursor form and stays
// bbolt's own. A keyed is valid for its bucket's transaction only.
type keyed struct {
	*bolt.Bucket
	c *bolt.Cursor
}

func keyedOf(b *bolt.Bucket) keyed { return keyed{Bucket: b} }

func (k *keyed) cursor() *bolt.Cursor {
	if k.c == nil {
		k.c = k.Bucket.Cursor()
	}
	return k.c
}

// Get returns the value of key, as Bucket.Get: nil when the bucket has no
// such key or it names a nested bucket.
func (k *keyed) Get(key []byte) []byte {
	at, v := k.cursor().Seek(key)
	if !bytes.Equal(at, key) {
		return nil
	}
	return v
}

// Delete removes key, as Bucket.Delete: a key that is not there is no
// error, a nested bucket's is bolt.ErrIncompatibleValue.
func (k *keyed) Delete(key []byte) error {
	c := k.cursor()
	if at, _ := c.Seek(key); !bytes.Equal(at, key) {
		return nil
	}
	return c.Delete()
}
