package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Defaults of the search for the raw message of an unlinked event.
const (
	DefaultLookback = time.Hour
	DefaultMaxIndex = 8
)

// Evidence finds the raw provider payloads behind canonical events. An
// event's Substate-Raw-Seq header names its raw message, read directly by
// sequence. An event without it (published before the link existed) is
// matched by id instead: SUBSTATE_RAW is searched from Lookback before the
// event was stored, and a raw message matches when EventID of it equals the
// event's id, which holds for events of the current mapping version.
type Evidence struct {
	Reader *Reader
	// EventID is the deterministic event id of the normalizer
	// (mapping.EventID); nil turns the search for unlinked events off.
	EventID func(raw substate.RawEvent, index int) string
	// Lookback is how long before an unlinked event the search starts; 0
	// means DefaultLookback. A normalizer that lagged longer is not covered.
	Lookback time.Duration
	// MaxIndex is how many events of one raw message the search tries; 0
	// means DefaultMaxIndex.
	MaxIndex int
}

// Lookup is what Find needs to know of one canonical event.
type Lookup struct {
	EventID  string
	Ref      substate.RawRef
	StoredAt time.Time
}

// Find returns the evidence of each lookup, in the same order. Evidence that
// cannot be found says why in its Missing field.
func (e *Evidence) Find(ctx context.Context, lookups []Lookup) ([]substate.Evidence, error) {
	out := make([]substate.Evidence, len(lookups))
	var unlinked []int
	for i, l := range lookups {
		if l.Ref.Seq == 0 {
			unlinked = append(unlinked, i)
			continue
		}
		ev, err := e.bySeq(ctx, l.Ref)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	if len(unlinked) > 0 {
		if err := e.search(ctx, lookups, unlinked, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bySeq reads the raw message a link names.
func (e *Evidence) bySeq(ctx context.Context, ref substate.RawRef) (substate.Evidence, error) {
	m, err := e.Reader.Get(ctx, substate.StreamRaw, ref.Seq)
	if substate.ErrorCode(err) == substate.ENOTFOUND {
		return substate.Evidence{Seq: ref.Seq, ID: ref.ID, Missing: "no longer in " + substate.StreamRaw + " (removed by its retention)"}, nil
	} else if err != nil {
		return substate.Evidence{}, err
	}
	ev := EvidenceOf(m)
	if ref.ID != "" && ev.ID != ref.ID {
		return substate.Evidence{Seq: ref.Seq, ID: ref.ID,
			Missing: fmt.Sprintf("%s sequence %d holds another message (id %q): was the stream recreated?", substate.StreamRaw, ref.Seq, ev.ID)}, nil
	}
	return ev, nil
}

// search scans SUBSTATE_RAW for the raw messages of the unlinked lookups.
func (e *Evidence) search(ctx context.Context, lookups []Lookup, unlinked []int, out []substate.Evidence) error {
	want := make(map[string][]int) // event id or raw id → lookups
	from, to := lookups[unlinked[0]].StoredAt, lookups[unlinked[0]].StoredAt
	for _, i := range unlinked {
		l := lookups[i]
		out[i] = substate.Evidence{ID: l.Ref.ID, Missing: "no raw link on the event and no raw message found with a matching id"}
		want[l.EventID] = append(want[l.EventID], i)
		if l.Ref.ID != "" {
			want["raw:"+l.Ref.ID] = append(want["raw:"+l.Ref.ID], i)
		}
		from, to = minTime(from, l.StoredAt), maxTime(to, l.StoredAt)
	}
	left := len(unlinked)
	rg := Range{Since: from.Add(-cmp.Or(e.Lookback, DefaultLookback)), Until: to}
	for m, err := range e.Reader.Messages(ctx, substate.StreamRaw, "", rg) {
		if err != nil {
			return err
		}
		for _, i := range e.matches(m, want) {
			if out[i].Missing != "" {
				out[i], left = EvidenceOf(m), left-1
			}
		}
		if left == 0 {
			return nil
		}
	}
	return nil
}

// matches returns the lookups m is the raw message of and forgets them.
func (e *Evidence) matches(m Message, want map[string][]int) []int {
	raw := RawEventOf(m)
	var hits []int
	take := func(key string) {
		hits = append(hits, want[key]...)
		delete(want, key)
	}
	take("raw:" + raw.ID)
	if e.EventID != nil {
		for i := range cmp.Or(e.MaxIndex, DefaultMaxIndex) {
			take(e.EventID(raw, i))
		}
	}
	return hits
}

// RawEventOf rebuilds the raw event of a SUBSTATE_RAW message as the
// normalizer does: its kind from the subject, its id from Nats-Msg-Id or,
// for a message published without one, "seq:" and its stream sequence.
func RawEventOf(m Message) substate.RawEvent {
	id := m.Header.Get(substate.HeaderMsgID)
	if id == "" {
		id = "seq:" + strconv.FormatUint(m.Seq, 10)
	}
	kind := strings.TrimPrefix(m.Subject, substate.SubjectRawPrefix)
	return substate.RawEvent{Kind: substate.RawKind(kind), ID: id, Body: m.Data, Header: substate.KeptRawHeaders(m.Header)}
}

// EvidenceOf describes a SUBSTATE_RAW message as evidence, its body as
// compact JSON (a JSON string when the payload is not JSON).
func EvidenceOf(m Message) substate.Evidence {
	raw := RawEventOf(m)
	return substate.Evidence{Seq: m.Seq, ID: raw.ID, Kind: raw.Kind, StoredAt: m.Stored.UTC(), Body: compact(m.Data)}
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.Bytes()
	}
	s, _ := json.Marshal(string(b))
	return s
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
