package state

import (
	"encoding/binary"

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

// keyCheckpointEvent holds the id of the event at the checkpoint's
// sequence (see CheckpointEvent).
var keyCheckpointEvent = []byte("checkpoint-event")

// CheckpointEvent returns the committed checkpoint and the id of the event
// the view applied at that sequence, read together: "" when the view has
// applied none or the events carried no id. The worker compares it with
// what SUBSTATE_EVENTS holds at that sequence at start-up: a store
// replaced by a copy can end at or past the checkpoint (its stream state
// saved later than its messages, or new writes since) and still not hold
// the events the view applied.
func (d *DB) CheckpointEvent() (uint64, string, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return 0, "", ErrClosed
	}
	var cp uint64
	var id string
	err := d.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyCheckpoint); len(v) == 8 {
			cp = binary.BigEndian.Uint64(v)
		}
		id = string(meta.Get(keyCheckpointEvent))
		return nil
	})
	return cp, id, err
}

// putCheckpointEvent stores id as the id of the checkpoint's event, or
// deletes the one stored when id is "".
func putCheckpointEvent(meta *bolt.Bucket, id string) error {
	if id == "" {
		return meta.Delete(keyCheckpointEvent)
	}
	return meta.Put(keyCheckpointEvent, []byte(id))
}

// readCheckpointEvent reads the checkpoint's event id from an open file;
// "" when there is none or it cannot be read.
func readCheckpointEvent(db *bolt.DB) string {
	var id string
	_ = db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			id = string(meta.Get(keyCheckpointEvent))
		}
		return nil
	})
	return id
}
