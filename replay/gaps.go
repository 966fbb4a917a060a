package replay

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Gaps finds the raw messages of SUBSTATE_RAW whose canonical events
// SUBSTATE_EVENTS does not hold: events lost with the events stream's
// store (garbage in a block, a restore from an older copy) while their raw
// evidence survived. A view rebuilt from such a stream and the replay
// verify compares it with agree, both without those events, so only the
// raw stream can tell.
//
// A raw message is in a gap when the normalizer has handled it (it is at
// or before the sequence Normalized returns), it was stored since
// SUBSTATE_EVENTS' first event (less ClockSlack; older ones' events may
// have expired by retention), the current mapping maps it to more events
// than the stream holds for it (events that name it as their raw message,
// and, for events from before they named one, events with its events'
// ids), and the normalizer did not dead-letter it. Like the evidence
// check, it maps every raw message it looks at.
type Gaps struct {
	Reader  *Reader
	Mapper  substate.Mapper
	EventID func(raw substate.RawEvent, index int) string
	// Normalized returns the last SUBSTATE_RAW sequence the normalizer
	// has handled along with every one before it; nil means the last raw
	// sequence an event names.
	Normalized func(ctx context.Context) (uint64, error)
	// ClockSlack allows for clocks that differ between the streams'
	// leaders; 0 means DefaultClockSlack.
	ClockSlack time.Duration
	// MaxFindings is how many gaps are described one by one; 0 means
	// DefaultMaxFindings.
	MaxFindings int
}

// Gap is a raw message whose events SUBSTATE_EVENTS does not all hold.
type Gap struct {
	Raw    substate.RawRef `json:"raw"`
	Stored time.Time       `json:"stored"` // when SUBSTATE_RAW stored it
	Events int             `json:"events"` // how many of its events are missing
	Of     int             `json:"of"`     // how many events it maps to
}

// GapResult is what a search for gaps found.
type GapResult struct {
	FirstSeq, LastSeq uint64 // the raw sequences looked at
	Count             int    // raw messages in a gap
	Events            int    // events they map to
	Gaps              []Gap  // the first of them, up to MaxFindings
}

// Failed reports whether a raw message's events are missing.
func (r GapResult) Failed() bool { return r.Count > 0 }

// Run searches SUBSTATE_RAW for gaps in SUBSTATE_EVENTS.
func (g *Gaps) Run(ctx context.Context) (GapResult, error) {
	var res GapResult
	refs, err := g.references(ctx)
	if err != nil {
		return res, err
	}
	if res.FirstSeq, err = g.firstRaw(ctx, refs.firstStored); err != nil || res.FirstSeq == 0 {
		return res, err
	}
	if res.LastSeq, err = g.lastRaw(ctx, refs); err != nil || res.LastSeq < res.FirstSeq {
		return res, err
	}
	var dlq map[uint64]bool // read when needed
	for m, err := range g.Reader.Messages(ctx, substate.StreamRaw, "", Range{FromSeq: res.FirstSeq, ToSeq: res.LastSeq}) {
		if err != nil {
			return res, err
		}
		gap, ok := g.check(m, refs)
		if !ok {
			continue
		}
		if dlq == nil {
			if dlq, err = g.deadLettered(ctx); err != nil {
				return res, err
			}
		}
		if dlq[m.Seq] {
			continue
		}
		res.Count, res.Events = res.Count+1, res.Events+gap.Events
		if len(res.Gaps) < cmp.Or(g.MaxFindings, DefaultMaxFindings) {
			res.Gaps = append(res.Gaps, gap)
		}
	}
	return res, nil
}

// eventRefs is what the events of SUBSTATE_EVENTS say of their raw
// messages.
type eventRefs struct {
	seqs        seqCounts // how many events name each raw sequence
	ids         *idSet    // ids of the events that name none
	last        uint64    // the last raw sequence an event names
	firstStored time.Time // when the first event was stored; zero when there is none
}

// references reads every event of SUBSTATE_EVENTS.
func (g *Gaps) references(ctx context.Context) (eventRefs, error) {
	first, last, _, err := g.Reader.Bounds(ctx, substate.StreamRaw)
	if err != nil {
		return eventRefs{}, err
	}
	refs := eventRefs{seqs: newSeqCounts(first, last), ids: newIDSet()}
	for m, err := range g.Reader.Messages(ctx, substate.StreamEvents, "", Range{}) {
		if err != nil {
			return refs, err
		}
		if refs.firstStored.IsZero() {
			refs.firstStored = m.Stored
		}
		if seq := m.RawRef().Seq; seq > 0 {
			refs.seqs.add(seq)
			refs.last = max(refs.last, seq)
		} else {
			refs.ids.add(m.Header.Get(substate.HeaderMsgID))
		}
	}
	return refs, nil
}

// seqCounts counts, for each sequence from first to last, the events
// that name it (up to 65,535).
type seqCounts struct {
	first uint64
	n     []uint16
}

func newSeqCounts(first, last uint64) seqCounts {
	if last < first || first == 0 {
		return seqCounts{}
	}
	return seqCounts{first: first, n: make([]uint16, last-first+1)}
}

// add counts one event naming seq; one outside the range is not kept.
func (s seqCounts) add(seq uint64) {
	if i := seq - s.first; seq >= s.first && i < uint64(len(s.n)) && s.n[i] < 1<<16-1 {
		s.n[i]++
	}
}

func (s seqCounts) count(seq uint64) int {
	if i := seq - s.first; seq >= s.first && i < uint64(len(s.n)) {
		return int(s.n[i])
	}
	return 0
}

// firstRaw is the first raw message stored since the first event (less
// ClockSlack), or SUBSTATE_RAW's first when the events stream is empty;
// 0 when there is none.
func (g *Gaps) firstRaw(ctx context.Context, firstEvent time.Time) (uint64, error) {
	rg := Range{}
	if !firstEvent.IsZero() {
		rg.Since = firstEvent.Add(-cmp.Or(g.ClockSlack, DefaultClockSlack))
	}
	for m, err := range g.Reader.Messages(ctx, substate.StreamRaw, "", rg) {
		return m.Seq, err
	}
	return 0, nil
}

// lastRaw is the last raw sequence the normalizer has handled.
func (g *Gaps) lastRaw(ctx context.Context, refs eventRefs) (uint64, error) {
	if g.Normalized == nil {
		return refs.last, nil
	}
	return g.Normalized(ctx)
}

// check maps a raw message: ok when it maps to more events than the
// stream holds for it.
func (g *Gaps) check(m Message, refs eventRefs) (Gap, bool) {
	raw := RawEventOf(m)
	data, err := g.Mapper.Map(raw)
	for i := 0; err == nil && i < len(data); i++ {
		err = data[i].Validate()
	}
	if err != nil || len(data) == 0 {
		return Gap{}, false // rejected: the normalizer dead-lettered it
	}
	held := refs.seqs.count(m.Seq)
	for i := 0; held < len(data) && i < len(data) && refs.ids.size() > 0; i++ {
		if refs.ids.has(g.EventID(raw, i)) {
			held++
		}
	}
	if held >= len(data) {
		return Gap{}, false
	}
	return Gap{Raw: substate.RawRef{Seq: m.Seq, ID: raw.ID}, Stored: m.Stored, Events: len(data) - held, Of: len(data)}, true
}

// deadLettered returns the raw sequences the normalizer dead-lettered.
func (g *Gaps) deadLettered(ctx context.Context) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	for m, err := range g.Reader.Messages(ctx, substate.StreamDLQ, substate.DLQSubject(substate.StageNormalize), Range{}) {
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(m.Header.Get(substate.HeaderDLQSubject), substate.SubjectRawPrefix) {
			continue
		}
		if seq, err := strconv.ParseUint(m.Header.Get(substate.HeaderDLQSeq), 10, 64); err == nil {
			out[seq] = true
		}
	}
	return out, nil
}
