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
	// seekGap is how far ahead of the raw scan's position the next raw
	// message a batch needs may lie and still be read up to: a wider gap
	// (of other kinds' messages, of raw messages mapped to nothing, of
	// duplicates) starts a new scan there instead, and so does a raw
	// message behind the position (events of a renormalization name old
	// raw messages).
	seekGap = 256
)

// rawScan reads SUBSTATE_RAW forward for one check: the normalizer maps
// the raw stream in order, so the raw messages the check's batches name
// follow each other, and one scan reads them all.
type rawScan struct {
	r    *Reader
	s    *scan    // nil before the first batch, or after a seek
	at   uint64   // the sequence the scan reads from: the last read's next
	peek *Message // read past the last batch's needs, for the next
}

// close ends the scan.
func (c *rawScan) close() {
	if c.s != nil {
		c.s.close()
		c.s, c.peek = nil, nil
	}
}

// seek starts a new scan at seq.
func (c *rawScan) seek(ctx context.Context, seq uint64) error {
	c.close()
	s, err := c.r.openScan(ctx, substate.StreamRaw, "", Range{FromSeq: seq})
	if err != nil {
		return err
	}
	c.s, c.at = s, seq
	return nil
}

// readRaw reads the raw messages a batch of events names with the check's
// raw scan. A sequence it did not return is left out; checkLinked asks for
// it alone.
func (c *rawScan) readRaw(ctx context.Context, events []Event) (map[uint64]Message, error) {
	seqs := make([]uint64, 0, len(events))
	for _, e := range events {
		if e.Err == nil {
			seqs = append(seqs, e.RawRef().Seq)
		}
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	raws := make(map[uint64]Message, len(seqs))
	return raws, c.collect(ctx, seqs, raws)
}

// collect puts the messages at seqs, sorted, that the stream holds into
// raws.
func (c *rawScan) collect(ctx context.Context, seqs []uint64, raws map[uint64]Message) error {
	fresh := false // the scan was started at seqs[0] and has read nothing
	for len(seqs) > 0 {
		if c.s == nil || seqs[0] < c.at || seqs[0]-c.at > seekGap {
			if err := c.seek(ctx, seqs[0]); err != nil {
				return err
			}
			fresh = true
		}
		m, ok, err := c.read(ctx)
		switch {
		case err != nil:
			return err
		case !ok && fresh:
			c.close()
			return nil // nothing from seqs[0] on: every one is left out
		case !ok:
			c.close() // the stream's end as of the scan's start: seek again
			continue
		}
		fresh = false
		for len(seqs) > 0 && seqs[0] < m.Seq {
			seqs = seqs[1:] // not in the stream
		}
		switch {
		case len(seqs) == 0:
			c.peek = &m
		case seqs[0] == m.Seq:
			raws[m.Seq] = m
			seqs = seqs[1:]
		}
	}
	return nil
}

// read returns the next message of the scan, the one peeked at first.
func (c *rawScan) read(ctx context.Context) (Message, bool, error) {
	if m := c.peek; m != nil {
		c.peek = nil
		return *m, true, nil
	}
	m, ok, err := c.s.next(ctx)
	if ok {
		c.at = m.Seq + 1
	}
	return m, ok, err
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
