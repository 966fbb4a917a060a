package state

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// DefaultExpireLimit is how many tenants one ExpireDeadlines marks stuck
// at most when asked for none.
const DefaultExpireLimit = 1024

// ExpireDeadlines marks stuck the tenants whose deadline is at or before
// the DB's clock and upTo (the zero time: the clock alone), the earliest
// first, up to limit (0 for
// DefaultExpireLimit) in one transaction: each gets Stuck and StuckSince
// (its deadline), leaves the timer index for the stuck index, and, with
// ChangeOutbox set, a stuck message in the outbox. A tenant whose deadline
// the current SLOs have moved (RecomputeDeadlines has not reached it yet)
// gets the new one instead, and is stuck only if that has passed too.
// The result's Changes are the stuck ones; more says that further due
// deadlines wait. upTo is how far the projector knows every event to be
// applied: a deadline after it may still be met by an event on its way. No provider is asked anything: a deadline is the view's
// own times and the SLOs.
func (d *DB) ExpireDeadlines(ctx context.Context, upTo time.Time, limit int) (res substate.ApplyResult, more bool, err error) {
	if err := ctx.Err(); err != nil {
		return res, false, err
	}
	if limit <= 0 {
		limit = DefaultExpireLimit
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return res, false, ErrClosed
	}
	w := d.newWork(d.slos.Load())
	cut := w.now
	if !upTo.IsZero() && upTo.Before(cut) {
		cut = utc(upTo)
	}
	err = d.view(func(tx *bolt.Tx) error {
		tenants := keyedOf(tx.Bucket(bucketTenants))
		c := tx.Bucket(bucketDeadlines).Cursor()
		n := 0
		for k, _ := c.First(); k != nil && dueBefore(k, cut); k, _ = c.Next() {
			if n == limit {
				more = true
				return nil
			}
			n++
			_, id, ok := deadlineTenant(k)
			if !ok {
				return fmt.Errorf("timer index key %x names no tenant", k)
			}
			rec, err := w.load(&tenants, d.pending, id)
			if err != nil {
				return err
			}
			w.expire(rec, cut, d.checkpoint)
		}
		return nil
	})
	if err != nil {
		return res, false, fmt.Errorf("expire deadlines: %w", err)
	}
	if len(w.dirty) == 0 {
		return res, more, nil
	}
	written, err := d.commit(w, d.seq, d.seqID)
	if err != nil {
		return res, false, err
	}
	w.res.Committed, w.res.BytesWritten = true, written
	for i := range w.res.Changes {
		LogChange(ctx, d.Logger, &w.res.Changes[i])
	}
	return w.res, more, nil
}

// expire marks rec stuck when its deadline, as the current SLOs set it,
// is at or before cut; a deadline the SLOs moved is only moved. checkpoint
// is the view's position, the sequence a stuck message carries for a
// record that does not know its last change's.
func (w *work) expire(rec *Record, cut time.Time, checkpoint uint64) {
	v := &rec.View
	if v.Stuck || v.Deadline.IsZero() {
		return
	}
	w.reschedule(rec)
	if v.Deadline.IsZero() || v.Deadline.After(cut) {
		return
	}
	old := *v
	v.Stuck, v.StuckSince, v.UpdatedAt = true, v.Deadline, w.now
	seq := rec.Seq
	if seq == 0 {
		seq = checkpoint
	}
	w.dirty[v.TenantID] = true
	w.res.Changes = append(w.res.Changes, substate.Change{Seq: seq, TenantID: v.TenantID, Old: old, New: *v, Kind: substate.ChangeStuck})
}
