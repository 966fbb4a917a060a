package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// Apply applies a batch: events at or below the applied sequence are
// skipped, the rest go through ApplyEvent in order. When any view changed,
// the changed records, the records unchanged events left pending and the
// batch's last sequence are written in one transaction; when none did, no
// write transaction is opened (see the package doc). An invalid event
// fails the whole batch with EINVALID before anything is applied.
func (d *DB) Apply(ctx context.Context, batch []substate.Sequenced) (substate.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return substate.ApplyResult{}, err
	}
	if err := validateBatch(batch); err != nil {
		return substate.ApplyResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return substate.ApplyResult{}, ErrClosed
	}
	w, err := d.plan(batch, d.Logger != nil && d.Logger.Enabled(ctx, slog.LevelDebug))
	if err != nil {
		return substate.ApplyResult{}, fmt.Errorf("apply batch: %w", err)
	}
	if w.changes() || d.pendingAfter(w) > d.PendingLimit {
		if err := ctx.Err(); err != nil {
			return substate.ApplyResult{}, err
		}
		written, err := d.commit(w, w.last, w.lastID)
		if err != nil {
			return substate.ApplyResult{}, err
		}
		w.res.Committed, w.res.BytesWritten = true, written
	} else {
		d.hold(w)
	}
	d.count(&w.res)
	for i := range w.res.Changes {
		LogChange(ctx, d.Logger, &w.res.Changes[i])
	}
	logNoops(ctx, d.Logger, w.noops)
	return w.res, nil
}

// validateBatch returns an EINVALID error for the first event the view
// cannot store.
func validateBatch(batch []substate.Sequenced) error {
	for i := range batch {
		ev := &batch[i].Event
		err := ev.Validate()
		switch {
		case err != nil:
		case !storable(ev.OccurredAt) || !storable(ev.ExecutionStartedAt):
			err = substate.Errorf(substate.EINVALID, "event time outside the years 0 to 9999")
		}
		if err != nil {
			return substate.WrapError(substate.EINVALID, err, "apply batch: event at sequence %d", batch[i].Seq)
		}
	}
	return nil
}

// storable reports whether t fits a record (and a JSON view).
func storable(t time.Time) bool {
	return t.IsZero() || (t.Unix() >= minUnix && t.Unix() <= maxUnix)
}

// work is one batch being applied: the stored and the newest record of
// every tenant it touches, and the result so far.
type work struct {
	now   time.Time
	slos  *substate.SLOs     // the deadlines changes get
	orig  map[string]*Record // as stored; nil when not stored yet
	next  map[string]*Record // after the batch's events so far
	dirty map[string]bool    // tenants to write: true when their view changed
	order []string           // tenants in first-touch order
	res   substate.ApplyResult
	last  uint64
	// lastID is the id of the event at last (see CheckpointEvent).
	lastID string
	// sloDigest, when set, is stored with the commit: the deadlines are
	// those of these SLOs.
	sloDigest *string
	// noops are the events that changed nothing, kept only when the
	// logger writes debug lines.
	noops []noop
	debug bool
}

// plan applies the batch in memory, reading stored records in one read
// transaction, keeping the events that change nothing when debug is set.
// d.mu must be held.
func (d *DB) plan(batch []substate.Sequenced, debug bool) (*work, error) {
	w := &work{
		debug:  debug,
		now:    utc(d.Now()),
		slos:   d.slos.Load(),
		orig:   make(map[string]*Record, len(batch)),
		next:   make(map[string]*Record, len(batch)),
		dirty:  make(map[string]bool, len(batch)),
		order:  make([]string, 0, len(batch)),
		last:   d.seq,
		lastID: d.seqID,
	}
	err := d.view(func(tx *bolt.Tx) error {
		tenants := keyedOf(tx.Bucket(bucketTenants))
		for i := range batch {
			s := &batch[i]
			if s.Seq <= w.last {
				w.res.Skipped++
				continue
			}
			w.last, w.lastID = s.Seq, s.ID
			rec, err := w.load(&tenants, d.pending, s.Event.TenantID)
			if err != nil {
				return err
			}
			next, out := ApplyEvent(*rec, s.Event, w.now)
			if out == Changed && w.res.Changes == nil {
				// Room for the rest of the batch at its first change: a
				// change holds two views, too large to copy as a slice grows.
				w.res.Changes = make([]substate.Change, 0, len(batch)-i)
			}
			w.apply(s, rec, next, out)
		}
		return nil
	})
	return w, err
}

// load returns the tenant's newest record: from this batch, else the
// pending one, else the stored one (the zero Record when there is none).
func (w *work) load(tenants *keyed, pending map[string]Record, id string) (*Record, error) {
	if rec, ok := w.next[id]; ok {
		return rec, nil
	}
	var orig, rec *Record
	if v := tenants.Get([]byte(id)); v != nil {
		r, err := decodeRecord(id, v)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", id, err)
		}
		pair := &[2]Record{r} // the stored record and the one the batch makes of it, one allocation
		orig, rec = &pair[0], &pair[1]
	} else {
		rec = new(Record)
	}
	rec.View.TenantID = id
	if p, ok := pending[id]; ok {
		*rec = p
	} else if orig != nil {
		*rec = *orig
	}
	w.orig[id], w.next[id] = orig, rec
	w.order = append(w.order, id)
	return rec, nil
}

// apply records the outcome of the event s on rec.
func (w *work) apply(s *substate.Sequenced, rec *Record, next Record, out Outcome) {
	id := next.View.TenantID
	if w.debug && out != Changed {
		w.noops = append(w.noops, noop{tenant: id, seq: s.Seq, outcome: out})
	}
	switch out {
	case Stale:
		w.res.Stale++
		return
	case Unchanged:
		w.res.Unchanged++
		if _, ok := w.dirty[id]; !ok {
			w.dirty[id] = false
		}
	case Changed:
		next.Seq = s.Seq
		setDeadline(w.slos, rec, &next)
		w.res.Changes = append(w.res.Changes, substate.Change{Seq: s.Seq, TenantID: id, Old: rec.View, New: next.View, TraceParent: s.TraceParent, Hop: s.Hop})
		w.dirty[id] = true
	}
	*rec = next
}

func (w *work) changes() bool { return len(w.res.Changes) > 0 }

func (w *work) touched(id string) bool {
	_, ok := w.dirty[id]
	return ok
}

// write stores every tenant the batch changed or advanced.
func (w *work) write(b *buckets) error {
	for _, id := range w.order {
		if !w.touched(id) {
			continue
		}
		if err := b.put(w.orig[id], w.next[id]); err != nil {
			return fmt.Errorf("tenant %q: %w", id, err)
		}
	}
	if err := b.saveCounts(); err != nil {
		return err
	}
	if err := b.saveStuckCounts(); err != nil {
		return err
	}
	return b.saveGroups()
}

// commit writes the changed records of a batch and every pending record
// with the checkpoint seq and the id of its event in one transaction, and deletes the changes the
// feed removed from the outbox, then clears pending and removed, and
// returns the bytes the transaction wrote. d.mu must be held.
func (d *DB) commit(w *work, seq uint64, id string) (uint64, error) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	var next time.Time // the first deadline after the commit
	err := d.update(func(tx *bolt.Tx) error {
		b := bucketsOf(tx)
		if err := d.writePending(&b, w); err != nil {
			return err
		}
		if err := d.deleteRemoved(tx); err != nil {
			return err
		}
		if w != nil {
			if err := w.write(&b); err != nil {
				return err
			}
			if d.ChangeOutbox {
				if err := w.writeOutbox(tx); err != nil {
					return err
				}
			}
		}
		if w != nil && w.sloDigest != nil {
			if err := b.meta.Put(keySLODigest, []byte(*w.sloDigest)); err != nil {
				return err
			}
		}
		next = firstDeadline(tx)
		if err := putCheckpointEvent(b.meta.Bucket, id); err != nil {
			return err
		}
		return b.meta.Put(keyCheckpoint, binary.BigEndian.AppendUint64(nil, seq))
	})
	if err != nil {
		return 0, fmt.Errorf("commit tenant view: %w", err)
	}
	clear(d.pending)
	clear(d.removed)
	clear(d.removedKeyed)
	d.seq, d.checkpoint, d.seqID = seq, seq, id
	d.stats.Commits++
	alloc := pageAlloc(d.db)
	written := uint64(alloc-d.allocated) + uint64(d.db.Info().PageSize)
	d.stats.BytesWritten += written
	d.allocated = alloc
	if d.ChangeOutbox && w != nil && w.changes() {
		d.keepFresh(w.res.Changes)
		d.signalOutbox()
	}
	if w != nil && w.sloDigest != nil {
		d.deadline.mu.Lock()
		d.deadline.digest = *w.sloDigest
		d.deadline.mu.Unlock()
	}
	d.setNextDeadline(next)
	return written, nil
}

// writePending writes the pending records the batch w does not write
// itself. Pending records have the index keys of their stored version, by
// the dirty check, so only the record is written.
func (d *DB) writePending(b *buckets, w *work) error {
	for id, rec := range d.pending {
		if w != nil && w.touched(id) {
			continue
		}
		if err := b.tenants.Put([]byte(id), encodeRecord(&rec)); err != nil {
			return err
		}
	}
	return nil
}

// pendingAfter is how many tenants would be pending if w were held.
func (d *DB) pendingAfter(w *work) int {
	n := len(d.pending)
	for id := range w.dirty {
		if _, ok := d.pending[id]; !ok {
			n++
		}
	}
	return n
}

// hold keeps the records a batch without changes advanced in memory until
// the next commit, and moves the applied sequence. d.mu must be held.
func (d *DB) hold(w *work) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	for id := range w.dirty {
		d.pending[id] = *w.next[id]
	}
	d.seq, d.seqID = w.last, w.lastID
}

func (d *DB) count(r *substate.ApplyResult) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	d.stats.Applied += uint64(len(r.Changes))
	d.stats.Unchanged += uint64(r.Unchanged)
	d.stats.Stale += uint64(r.Stale)
	d.stats.Skipped += uint64(r.Skipped)
}
