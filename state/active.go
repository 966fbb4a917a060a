package state

import (
	"context"
	"iter"
	"time"

	"github.com/substatehq/substate"
)

// Compile-time check that DB lists the tenants a reconciler polls.
var _ substate.ActiveLister = (*DB)(nil)

// activeChunk is how many tenants Active reads per read transaction.
const activeChunk = 256

// Active yields the tenants whose execution has not ended (running,
// waiting, backing-off or error) and whose last event is older than
// lastEventBefore, by sub-state then tenant id: the runs a reconciler should
// ask their provider about. It reads the sub-state index in chunks, each in
// its own short read transaction, so a slow consumer holds no transaction
// open; a tenant that changes between chunks may be missed or yielded
// twice. An error is yielded once, last.
func (d *DB) Active(ctx context.Context, lastEventBefore time.Time) iter.Seq2[substate.TenantView, error] {
	s := scan{kind: kindActive, bucket: bucketSubState, from: []byte{firstActiveCode}, to: []byte{lastActiveCode + 1},
		id: func(k []byte) []byte { return k[1:] }}
	stale := func(v *substate.TenantView) bool { return v.LastEventAt.Before(lastEventBefore) }
	return func(yield func(substate.TenantView, error) bool) {
		var after []byte
		for {
			if err := ctx.Err(); err != nil {
				yield(substate.TenantView{}, err)
				return
			}
			views, last, more, err := d.list(ctx, s, after, activeChunk, stale)
			if err != nil {
				yield(substate.TenantView{}, err)
				return
			}
			for _, v := range views {
				if !yield(v, nil) {
					return
				}
			}
			if !more {
				return
			}
			after = last
		}
	}
}
