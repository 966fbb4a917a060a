package replay

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
)

// Defaults of a Rebuild.
const (
	DefaultBatchSize = 512 // the worker's default projector batch
	DefaultBatchSpan = time.Second
)

// Rebuild folds SUBSTATE_EVENTS into a view through the code path of the
// live projector: events decoded the same way (a message that is not a
// canonical event is left out, as the projector dead-letters it) and
// applied in stream order, in batches, with ViewStore.Apply.
//
// The fold is deterministic: a batch holds at most BatchSize events stored
// within BatchSpan of its first, and Now returns the stored time of the
// batch's last event. Set Now as the view's clock and updatedAt becomes the
// time SUBSTATE_EVENTS stored the event that changed the tenant (to within
// BatchSpan), where the live view has the wall-clock time of its commit.
type Rebuild struct {
	Reader    *Reader
	View      substate.ViewStore
	BatchSize int           // 0 means DefaultBatchSize
	BatchSpan time.Duration // 0 means DefaultBatchSpan
	// Progress, when set, is called after every applied batch.
	Progress func(Progress)

	now time.Time
}

// Progress is how far a rebuild got.
type Progress struct {
	FirstSeq, LastSeq uint64 // the sequences the rebuild reads, as far as known at its start
	Seq               uint64 // the last sequence read
	Events            int    // canonical events applied
	Invalid           int    // messages left out: not canonical events
	Changes           int    // events that changed a view
	Unchanged, Stale  int
}

// Now returns the stored time of the last event of the batch being
// applied: the view's clock during a rebuild.
func (r *Rebuild) Now() time.Time { return r.now }

// Run folds the events of rg into the view and returns what it did.
func (r *Rebuild) Run(ctx context.Context, rg Range) (Progress, error) {
	var p Progress
	first, last, _, err := r.Reader.Bounds(ctx, substate.StreamEvents)
	if err != nil {
		return p, err
	}
	p.FirstSeq, p.LastSeq = max(first, rg.FromSeq), last
	if rg.ToSeq > 0 {
		p.LastSeq = min(last, rg.ToSeq)
	}
	size, span := cmp.Or(r.BatchSize, DefaultBatchSize), cmp.Or(r.BatchSpan, DefaultBatchSpan)
	batch := make([]substate.Sequenced, 0, size)
	var start, end time.Time // stored times of the batch's first and last event
	for m, err := range r.Reader.Events(ctx, "", rg) {
		if err != nil {
			return p, err
		}
		if len(batch) == size || (len(batch) > 0 && m.Stored.Sub(start) > span) {
			if err := r.apply(ctx, batch, end, &p); err != nil {
				return p, err
			}
			batch = batch[:0]
		}
		p.Seq = m.Seq
		if m.Err != nil {
			p.Invalid++
			continue
		}
		if len(batch) == 0 {
			start = m.Stored
		}
		end = m.Stored
		batch = append(batch, substate.Sequenced{Seq: m.Seq, Event: m.Event.Data, ID: m.Event.ID})
	}
	return p, r.apply(ctx, batch, end, &p)
}

// apply applies one batch with the view's clock at its last event.
func (r *Rebuild) apply(ctx context.Context, batch []substate.Sequenced, stored time.Time, p *Progress) error {
	if len(batch) == 0 {
		return nil
	}
	r.now = stored
	res, err := r.View.Apply(ctx, batch)
	if err != nil {
		return fmt.Errorf("rebuild: apply sequences %d to %d: %w", batch[0].Seq, batch[len(batch)-1].Seq, err)
	}
	p.Events += len(batch)
	p.Changes += len(res.Changes)
	p.Unchanged += res.Unchanged
	p.Stale += res.Stale
	if r.Progress != nil {
		r.Progress(*p)
	}
	return nil
}
