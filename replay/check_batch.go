package replay

import (
	"context"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

const (
	// linkedBatch is how many linked events the check reads the raw
	// messages of at once.
	linkedBatch = 512
	// spanSlack is how many sequences a span of SUBSTATE_RAW read for a
	// batch may hold beyond the ones the batch names (a gap of other
	// kinds' messages, of raw messages mapped to nothing, of duplicates):
	// a wider gap starts a new span, and so does a span that would read
	// more than twice the messages it needs plus the slack, so a check
	// never reads much of the stream it does not need.
	spanSlack = 256
)

// readRaw reads the raw messages a batch of events names, span by span of
// nearby sequences, each span with batched direct gets. A sequence a span
// did not return is left out; checkLinked asks for it alone.
func (c *Checker) readRaw(ctx context.Context, events []Event) (map[uint64]Message, error) {
	seqs := make([]uint64, 0, len(events))
	for _, e := range events {
		if e.Err == nil {
			seqs = append(seqs, e.RawRef().Seq)
		}
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	raws := make(map[uint64]Message, len(seqs))
	for len(seqs) > 0 {
		n := 1
		for n < len(seqs) && seqs[n]-seqs[n-1] <= spanSlack && seqs[n]-seqs[0] < uint64(2*n+spanSlack) {
			n++
		}
		rg := Range{FromSeq: seqs[0], ToSeq: seqs[n-1]}
		for m, err := range c.Reader.Messages(ctx, substate.StreamRaw, "", rg) {
			if err != nil {
				return nil, err
			}
			if _, ok := slices.BinarySearch(seqs[:n], m.Seq); ok {
				raws[m.Seq] = m
			}
		}
		seqs = seqs[n:]
	}
	return raws, nil
}

// pace counts busy, the working time of one batch, and waits as long as
// the budget asks: busy/Budget in all, so the check works at most Budget
// of the time. It returns busy.
func (c *Checker) pace(ctx context.Context, busy time.Duration) time.Duration {
	c.Metrics.work(busy)
	if c.Budget <= 0 || c.Budget >= 1 {
		return busy
	}
	wait := time.Duration(float64(busy) * (1/c.Budget - 1))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return busy
}
