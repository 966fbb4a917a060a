package state

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// Compile-time check that DB keeps deadlines.
var _ substate.DeadlineStore = (*DB)(nil)

// DefaultRecomputeBatch is how many tenants one transaction of
// RecomputeDeadlines reads.
const DefaultRecomputeBatch = 1000

// deadlineState is what the deadline loop watches: the first deadline of
// the timer index as of the last commit, the digest of the SLOs the
// stored deadlines were set with, and a signal when either moved.
type deadlineState struct {
	mu     sync.Mutex
	next   time.Time
	digest string // as stored in meta
	moved  chan struct{}
}

func (s *deadlineState) init() {
	if s.moved == nil {
		s.moved = make(chan struct{}, 1)
	}
}

func (s *deadlineState) signal() {
	select {
	case s.moved <- struct{}{}:
	default:
	}
}

// setNextDeadline records the first deadline after a commit and wakes
// the deadline loop when it moved.
func (d *DB) setNextDeadline(t time.Time) {
	s := &d.deadline
	s.mu.Lock()
	moved := !t.Equal(s.next)
	s.next = t
	s.mu.Unlock()
	if moved {
		s.signal()
	}
}

// SetSLOs sets the deadlines every later change gets (nil: none), and
// wakes the deadline loop, which recomputes the stored ones when they were
// set with other SLOs (see RecomputeDeadlines). It may be called at any
// time, before Open too.
func (d *DB) SetSLOs(s *substate.SLOs) {
	d.slos.Store(s)
	d.deadline.init()
	d.deadline.signal()
}

// SLOs returns the SLOs set last.
func (d *DB) SLOs() *substate.SLOs { return d.slos.Load() }

// NextDeadline returns the first deadline of the timer index (zero when
// none is set), and whether the stored deadlines were set with other SLOs
// than the current ones, so that RecomputeDeadlines is due.
func (d *DB) NextDeadline() (time.Time, bool) {
	s := &d.deadline
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.digest != d.slos.Load().Digest()
}

// DeadlinesChanged returns the channel that receives when the first
// deadline or the SLOs changed (at most one signal is buffered).
func (d *DB) DeadlinesChanged() <-chan struct{} {
	d.deadline.init()
	return d.deadline.moved
}

// readDeadlineState reads the first deadline and the SLO digest of an
// opened file.
func (d *DB) readDeadlineState(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		s := &d.deadline
		s.mu.Lock()
		defer s.mu.Unlock()
		s.next = firstDeadline(tx)
		s.digest = string(tx.Bucket(bucketMeta).Get(keySLODigest))
		return nil
	})
}

// RecomputeDeadlines gives every tenant that is neither terminal nor stuck
// the deadline the current SLOs set, in transactions of
// DefaultRecomputeBatch tenants (so that changes go on between them), and
// then records the SLOs' digest: NextDeadline stops saying it is due. It
// returns how many deadlines moved. SLOs set while it walks start the walk
// over. A stuck tenant keeps the deadline it missed until it changes.
func (d *DB) RecomputeDeadlines(ctx context.Context) (int, error) {
	moved := 0
	for {
		slos := d.slos.Load()
		n, err := d.recomputeWalk(ctx, slos)
		moved += n
		if err != nil || d.slos.Load() == slos {
			return moved, err
		}
		// Other SLOs were set during the walk: walk again with them.
	}
}

// recomputeWalk walks the active tenants in batches with slos, until the
// end or until other SLOs are set.
func (d *DB) recomputeWalk(ctx context.Context, slos *substate.SLOs) (int, error) {
	var after []byte
	moved := 0
	for {
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		if d.slos.Load() != slos {
			return moved, nil
		}
		n, last, err := d.recomputeBatch(slos, after)
		moved += n
		if err != nil || last == nil {
			return moved, err
		}
		after = last
	}
}

// recomputeBatch recomputes the deadlines of up to DefaultRecomputeBatch
// active tenants after the sub-state index key after (nil: from the
// first) in one transaction, and returns how many moved and the last key
// read; nil when the walk is over, and then the transaction also records
// the SLOs' digest.
func (d *DB) recomputeBatch(slos *substate.SLOs, after []byte) (int, []byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return 0, nil, ErrClosed
	}
	w := d.newWork(slos)
	var last []byte
	n := 0
	err := d.view(func(tx *bolt.Tx) error {
		tenants := keyedOf(tx.Bucket(bucketTenants))
		c := tx.Bucket(bucketSubState).Cursor()
		k, _ := c.Seek([]byte{firstActiveCode})
		if after != nil {
			if k, _ = c.Seek(after); bytes.Equal(k, after) {
				k, _ = c.Next()
			}
		}
		for ; len(k) > 1 && k[0] <= lastActiveCode; k, _ = c.Next() {
			if n == DefaultRecomputeBatch {
				last = append([]byte(nil), k...)
				return nil
			}
			n++
			rec, err := w.load(&tenants, d.pending, string(k[1:]))
			if err != nil {
				return err
			}
			w.reschedule(rec)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("recompute deadlines: %w", err)
	}
	if last == nil {
		digest := slos.Digest()
		w.sloDigest = &digest
	} else if len(w.dirty) == 0 {
		return 0, last, nil
	}
	if _, err := d.commit(w, d.seq, d.seqID); err != nil {
		return 0, nil, err
	}
	return len(w.dirty), last, nil
}

// newWork returns an empty batch of writes that apply no event.
func (d *DB) newWork(slos *substate.SLOs) *work {
	return &work{now: utc(d.Now()), slos: slos, orig: map[string]*Record{}, next: map[string]*Record{}, dirty: map[string]bool{}, last: d.seq}
}

// reschedule gives rec the deadline w.slos sets, unless it is stuck, and
// marks it to be written when that moved it.
func (w *work) reschedule(rec *Record) {
	v := &rec.View
	if v.Stuck {
		return
	}
	at, slo := deadlineUnder(w.slos, rec)
	if at.Equal(v.Deadline) && slo == v.DeadlineSLO {
		return
	}
	v.Deadline, v.DeadlineSLO = at, slo
	w.dirty[v.TenantID] = true
}
