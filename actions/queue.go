package actions

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// item is one member waiting for its turn: its index in the frozen set,
// the earliest it may be tried, and how many tries failed without an
// answer.
type item struct {
	idx       int
	notBefore time.Time
	tries     int
}

// queue holds a lane's members until they have an outcome: ready ones
// first in, those to try again later by time. Workers take the next ready
// member; one tried without an outcome comes back later (put); done
// counts one finished.
type queue struct {
	mu      sync.Mutex
	ready   []item
	later   laterHeap
	open    int // members not finished: queued or being acted on
	stopped func() bool
}

func newQueue(idxs []int, stopped func() bool) *queue {
	q := &queue{open: len(idxs), stopped: stopped}
	for _, i := range idxs {
		q.ready = append(q.ready, item{idx: i})
	}
	return q
}

// next returns the next member to act on, waiting for one to be due, or
// false when every member is finished, the job stopped taking members, or
// ctx is done. hold is called while the job is paused, and says whether to
// wait on.
func (q *queue) next(ctx context.Context, hold func() bool) (item, bool) {
	for {
		if q.stopped() || ctx.Err() != nil {
			return item{}, false
		}
		wait := 50 * time.Millisecond
		if !hold() {
			it, ok, due := q.take(time.Now())
			switch {
			case ok:
				return it, true
			case q.finished():
				return item{}, false
			case !due.IsZero():
				wait = min(wait, max(time.Until(due), time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			return item{}, false
		case <-time.After(wait):
		}
	}
}

// take pops a ready member, moving due ones to ready first; due is when
// the next later one is due when none is ready.
func (q *queue) take(now time.Time) (item, bool, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.later) > 0 && !q.later[0].notBefore.After(now) {
		q.ready = append(q.ready, heap.Pop(&q.later).(item))
	}
	if len(q.ready) > 0 {
		it := q.ready[0]
		q.ready = q.ready[1:]
		return it, true, time.Time{}
	}
	if len(q.later) > 0 {
		return item{}, false, q.later[0].notBefore
	}
	return item{}, false, time.Time{}
}

// put brings a member back to try again at notBefore.
func (q *queue) put(it item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	heap.Push(&q.later, it)
}

// done counts a member finished.
func (q *queue) done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open--
}

// finished reports whether every member is finished.
func (q *queue) finished() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.open <= 0
}

// laterHeap orders members to try again by when.
type laterHeap []item

func (h laterHeap) Len() int           { return len(h) }
func (h laterHeap) Less(i, j int) bool { return h[i].notBefore.Before(h[j].notBefore) }
func (h laterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *laterHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *laterHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
