package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// bucketOutbox holds the changes the change feed has not acknowledged:
// sequence (8 bytes, big-endian) → the change as JSON; an unstuck or
// stuck message has its kind (one byte) and the tenant id after the
// sequence, so that the messages of one sequence sort in the order they
// happen (substate.ChangeKind). With ChangeOutbox
// set, every commit that changes a view writes its changes here in the
// same transaction.
var bucketOutbox = []byte("change-outbox")

// outboxKey is the outbox key of a change.
func outboxKey(c *substate.Change) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(c.TenantID)), c.Seq)
	if c.Kind == substate.ChangeFromEvent {
		return k
	}
	return append(append(k, byte(c.Kind)), c.TenantID...)
}

// Compile-time check that DB is a change outbox.
var _ substate.ChangeOutbox = (*DB)(nil)

// outboxEntry is the value of a change in the outbox: the change, the
// traceparent of the event that made it, when tracing is on the
// traceparent of the span that applied it, and what kind of message it
// is.
type outboxEntry struct {
	Change      substate.Change     `json:"change"`
	TraceParent string              `json:"traceparent,omitempty"`
	Hop         string              `json:"hop,omitempty"`
	Kind        substate.ChangeKind `json:"kind,omitzero"`
}

// writeOutbox stores the batch's changes in the outbox, and after a
// change that ended a tenant's stuck, its unstuck message.
func (w *work) writeOutbox(tx *bolt.Tx) error {
	b := tx.Bucket(bucketOutbox)
	for i := range w.res.Changes {
		c := &w.res.Changes[i]
		if err := putOutbox(b, c); err != nil {
			return err
		}
		if c.Kind == substate.ChangeFromEvent && c.Old.Stuck && !c.New.Stuck {
			u := *c
			u.Kind = substate.ChangeUnstuck
			if err := putOutbox(b, &u); err != nil {
				return err
			}
		}
	}
	return nil
}

// putOutbox stores one change in the outbox, and keeps its encoded data
// in c.Encoded for the feed's message.
func putOutbox(b *bolt.Bucket, c *substate.Change) error {
	v, err := encodeOutbox(c)
	if err != nil {
		return err
	}
	return b.Put(outboxKey(c), v)
}

// encodeOutbox encodes a change as its outboxEntry: the change's data
// first, then the members beside it; the JSON is the same as encoding the
// outboxEntry whole. Data not encoded yet is written in place and kept in
// c.Encoded, a part of the entry, for the feed's message.
func encodeOutbox(c *substate.Change) ([]byte, error) {
	const head = `{"change":`
	encode := c.Encoded == nil // its data is written here, and kept
	room := len(c.Encoded)
	if encode {
		room = substate.ChangeJSONRoom(c)
	}
	v := make([]byte, 0, len(head+`,"traceparent":"","hop":"","kind":255}`)+room+len(c.TraceParent)+len(c.Hop))
	v = append(v, head...)
	var err error
	if !encode {
		v = append(v, c.Encoded...)
	} else if v, err = substate.AppendChange(v, c); err != nil {
		return nil, fmt.Errorf("encode change %d: %w", c.Seq, err)
	}
	end := len(v)
	if c.TraceParent != "" {
		if v, err = jsontext.AppendQuote(append(v, `,"traceparent":`...), c.TraceParent); err != nil {
			return nil, fmt.Errorf("encode change %d: traceparent: %w", c.Seq, err)
		}
	}
	if c.Hop != "" {
		if v, err = jsontext.AppendQuote(append(v, `,"hop":`...), c.Hop); err != nil {
			return nil, fmt.Errorf("encode change %d: hop: %w", c.Seq, err)
		}
	}
	if c.Kind != 0 {
		v = strconv.AppendUint(append(v, `,"kind":`...), uint64(c.Kind), 10)
	}
	v = append(v, '}')
	if encode {
		c.Encoded = v[len(head):end:end] // taken last, a part of the entry even where an append above moved v
	}
	return v, nil
}

// maxFresh bounds the changes kept in memory beside the outbox: a feed
// that lags further reads the rest from the file.
const maxFresh = 16384

// keepFresh keeps the changes a commit just wrote to the outbox in memory,
// up to maxFresh, so that the change feed, which publishes them right
// after, takes them as they are instead of decoding them back from the
// file; the file stays the record (after a restart, beyond maxFresh, and
// for stuck and unstuck messages, PendingChanges decodes them). d.pmu
// must be held for writing.
func (d *DB) keepFresh(changes []substate.Change) {
	for _, c := range changes {
		if len(d.fresh) >= maxFresh {
			return
		}
		if c.Kind == substate.ChangeFromEvent {
			d.fresh[c.Seq] = c
		}
	}
}

// signalOutbox wakes the change feed after a commit that wrote changes.
func (d *DB) signalOutbox() {
	select {
	case d.outboxReady <- struct{}{}:
	default: // already signalled
	}
}

// ChangesWaiting returns the channel that receives after each commit
// that wrote changes into the outbox (at most one signal is buffered).
func (d *DB) ChangesWaiting() <-chan struct{} { return d.outboxReady }

// PendingChanges returns up to limit changes from the outbox, the oldest
// first.
func (d *DB) PendingChanges(ctx context.Context, limit int) ([]substate.Change, error) {
	var out []substate.Change
	err := d.read(ctx, "read change outbox", func(tx *bolt.Tx) error {
		// Sized for what is in memory, usually all that waits: a change
		// holds two views, so growing by doubling would copy the round
		// about twice.
		if n := min(limit, len(d.fresh)); n > 0 {
			out = make([]substate.Change, 0, n)
		}
		c := tx.Bucket(bucketOutbox).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if d.isRemoved(k) {
				continue
			}
			if c, ok := d.fresh[binary.BigEndian.Uint64(k)]; ok && len(k) == 8 {
				out = append(out, c)
				continue
			}
			var e outboxEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode outbox change %x: %w", k, err)
			}
			e.Change.TraceParent, e.Change.Hop, e.Change.Kind = e.TraceParent, e.Hop, e.Kind
			out = append(out, e.Change)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isRemoved reports whether the feed removed the change of an outbox key.
// d.pmu must be held.
func (d *DB) isRemoved(k []byte) bool {
	if len(k) == 8 {
		_, gone := d.removed[binary.BigEndian.Uint64(k)]
		return gone
	}
	_, gone := d.removedKeyed[string(k)]
	return gone
}

// RemoveChanges forgets these changes, once the feed has them: PendingChanges and OutboxLen leave them out at once, and the
// file loses them in the next commit of the view, so that draining the
// outbox costs the projector no write transaction of its own. When no
// commit comes within removeDelay (a quiet view), a transaction of their
// own removes them. A crash before then publishes them again after the
// restart, which the stream drops as duplicates inside its dedupe window.
func (d *DB) RemoveChanges(ctx context.Context, changes []substate.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.db == nil {
		return ErrClosed
	}
	for i := range changes {
		if c := &changes[i]; c.Kind == substate.ChangeFromEvent {
			d.removed[c.Seq] = struct{}{}
			delete(d.fresh, c.Seq)
		} else {
			d.removedKeyed[string(outboxKey(c))] = struct{}{}
		}
	}
	delay := removeDelay
	if len(d.removed)+len(d.removedKeyed) >= removeBatch {
		delay = 0
	}
	switch {
	case d.removeTimer == nil:
		d.removeTimer = time.AfterFunc(delay, d.flushRemoved)
	case !d.removeArmed || delay == 0:
		d.removeTimer.Reset(delay)
	}
	d.removeArmed = true
	return nil
}

// removeDelay is how long changes the feed has removed may wait for the
// next commit of the view before a transaction of their own removes them
// from the file; removeBatch is how many may wait.
const (
	removeDelay = 200 * time.Millisecond
	removeBatch = 4096
)

// flushRemoved removes from the file the changes the feed removed that no
// commit has taken along yet.
func (d *DB) flushRemoved() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pmu.Lock()
	d.removeArmed = false
	d.pmu.Unlock()
	if d.db == nil || d.corrupt.Load() != nil {
		return
	}
	if err := d.removeNow(); err != nil && d.Logger != nil {
		d.Logger.Warn("removing published changes from the outbox failed; the next commit does it", "err", err)
	}
}

// removeNow deletes the changes the feed removed from the file in a
// transaction of their own (not a commit of the view: Stats.Commits does
// not count it). d.mu must be held.
func (d *DB) removeNow() error {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if len(d.removed)+len(d.removedKeyed) == 0 {
		return nil
	}
	if err := d.update(d.deleteRemoved); err != nil {
		return err
	}
	clear(d.removed)
	clear(d.removedKeyed)
	return nil
}

// deleteRemoved deletes the changes the feed removed from the outbox
// bucket. d.pmu must be held for writing.
func (d *DB) deleteRemoved(tx *bolt.Tx) error {
	b := keyedOf(tx.Bucket(bucketOutbox))
	var k [8]byte
	for s := range d.removed {
		binary.BigEndian.PutUint64(k[:], s)
		if err := b.Delete(k[:]); err != nil {
			return fmt.Errorf("remove from change outbox: %w", err)
		}
	}
	for s := range d.removedKeyed {
		if err := b.Delete([]byte(s)); err != nil {
			return fmt.Errorf("remove from change outbox: %w", err)
		}
	}
	return nil
}

// OutboxLen returns how many changes wait in the outbox.
func (d *DB) OutboxLen() (int, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return 0, ErrClosed
	}
	var n int
	err := d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		n = b.Stats().KeyN
		var k [8]byte
		for s := range d.removed {
			if binary.BigEndian.PutUint64(k[:], s); b.Get(k[:]) != nil {
				n--
			}
		}
		for s := range d.removedKeyed {
			if b.Get([]byte(s)) != nil {
				n--
			}
		}
		return nil
	})
	return n, err
}
