package state

import (
	bolt "go.etcd.io/bbolt"
)

// keyStreamMark holds what identifies the instance of SUBSTATE_EVENTS the
// checkpoint counts in (see StreamMark).
var keyStreamMark = []byte("events-stream")

// StreamMark returns the mark SetStreamMark stored, "" when none was: the
// identity of the SUBSTATE_EVENTS instance (its creation time) whose
// sequences the checkpoint counts. A stream deleted and created again
// starts its sequences over, so a checkpoint is meaningless against
// another instance; the worker compares the two at start-up.
func (d *DB) StreamMark() (string, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return "", ErrClosed
	}
	var mark string
	err := d.view(func(tx *bolt.Tx) error {
		mark = string(tx.Bucket(bucketMeta).Get(keyStreamMark))
		return nil
	})
	return mark, err
}

// SetStreamMark stores mark as the identity of the SUBSTATE_EVENTS
// instance the view follows.
func (d *DB) SetStreamMark(mark string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return ErrClosed
	}
	return d.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyStreamMark, []byte(mark))
	})
}
