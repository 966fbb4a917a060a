package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/substatehq/substate"
)

// viewProbe wraps a worker's view to observe the projector: after every
// applied batch it counts the events, the batches that changed nothing and
// whether they committed, and for each status change of the load applied
// for the first time, the time since it was sent (ingest → view latency).
type viewProbe struct {
	substate.ViewStore
	sent    []atomic.Int64 // by key: unix nanoseconds of the first send, 0 = not sent
	applied []atomic.Bool  // by key: applied once already

	events   atomic.Int64 // events handed to Apply
	progress chan struct{}

	mu               sync.Mutex
	latencies        []time.Duration
	unchanged, stale int
	idleBatches      int // batches that changed no tenant
	idleCommits      int // … and committed anyway
}

func newViewProbe(view substate.ViewStore, keys int) *viewProbe {
	return &viewProbe{
		ViewStore: view, sent: make([]atomic.Int64, keys), applied: make([]atomic.Bool, keys),
		progress: make(chan struct{}, 1),
	}
}

// markSent records the send time of a status change, once.
func (p *viewProbe) markSent(key int, at time.Time) {
	if key >= 0 && key < len(p.sent) {
		p.sent[key].CompareAndSwap(0, at.UnixNano())
	}
}

// Apply applies the batch and observes it.
func (p *viewProbe) Apply(ctx context.Context, batch []substate.Sequenced) (substate.ApplyResult, error) {
	res, err := p.ViewStore.Apply(ctx, batch)
	if err != nil {
		return res, err
	}
	now := time.Now().UnixNano()
	var lat []time.Duration
	for i := range batch {
		k := keyOf(&batch[i].Event)
		if k < 0 || k >= len(p.sent) || p.applied[k].Swap(true) {
			continue
		}
		if sent := p.sent[k].Load(); sent > 0 {
			lat = append(lat, time.Duration(now-sent))
		}
	}
	p.mu.Lock()
	p.latencies = append(p.latencies, lat...)
	p.unchanged += res.Unchanged
	p.stale += res.Stale
	if len(res.Changes) == 0 {
		p.idleBatches++
		if res.Committed {
			p.idleCommits++
		}
	}
	p.mu.Unlock()
	p.events.Add(int64(len(batch) - res.Skipped))
	select {
	case p.progress <- struct{}{}:
	default:
	}
	return res, nil
}

// probeCounts is what a probe observed.
type probeCounts struct {
	latencies                []time.Duration
	unchanged, stale         int
	idleBatches, idleCommits int
}

// counts returns what the probe observed so far and starts over.
func (p *viewProbe) counts() probeCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := probeCounts{p.latencies, p.unchanged, p.stale, p.idleBatches, p.idleCommits}
	p.latencies, p.unchanged, p.stale, p.idleBatches, p.idleCommits = nil, 0, 0, 0, 0
	return c
}

// waitEvents blocks until the view has been handed n events, ctx is done,
// or nothing was applied for idle.
func (p *viewProbe) waitEvents(ctx context.Context, n int64, idle time.Duration) error {
	t := time.NewTimer(idle)
	defer t.Stop()
	for p.events.Load() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return substate.Errorf(substate.EUNAVAILABLE, "the view received %d of %d events and nothing for %s", p.events.Load(), n, idle)
		case <-p.progress:
			t.Reset(idle)
		}
	}
	return nil
}
