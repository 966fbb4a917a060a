package replay

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/substatehq/substate"
)

// Defaults of a Renormalizer.
const (
	DefaultPublishBatch = 256
	DefaultClockSlack   = 10 * time.Minute
)

// Renormalizer maps the raw messages of SUBSTATE_RAW again with the
// current mapping and publishes the canonical events SUBSTATE_EVENTS does
// not hold yet, so that running it twice has the effect of running it once.
//
// Event ids are deterministic (kind, raw id, index and mapping version), so
// JetStream's duplicate window drops a repeated id, but only within that
// window. Beyond it the Renormalizer relies on its own check: before
// publishing, it collects the ids of every event stored in SUBSTATE_EVENTS
// since the first raw message of the range (less ClockSlack), which
// includes every event ever mapped from that range, and skips those ids.
// A corrected mapping has a new mapping version, so its events have new ids
// and are published.
type Renormalizer struct {
	Reader  *Reader
	Mapper  substate.Mapper
	EventID func(raw substate.RawEvent, index int) string
	Events  substate.EventPublisher
	// Batch is how many events one publish call carries; 0 means
	// DefaultPublishBatch.
	Batch int
	// ClockSlack allows for clocks that differ between the streams' leaders
	// on a cluster; 0 means DefaultClockSlack.
	ClockSlack time.Duration
	// DryRun maps and counts without publishing.
	DryRun bool
}

// RenormalizeResult counts what a renormalization did.
type RenormalizeResult struct {
	FirstSeq, LastSeq uint64 // the raw sequences read
	Raw               int    // raw messages read
	Rejected          int    // raw messages the mapping rejects (the normalizer dead-letters them)
	FirstRejection    string // the reason of the first one
	Mapped            int    // canonical events mapped
	Present           int    // of those, already in SUBSTATE_EVENTS
	Published         int    // published (or, with DryRun, that would be)
}

// Run renormalizes the raw messages of rg.
func (r *Renormalizer) Run(ctx context.Context, rg Range) (RenormalizeResult, error) {
	var res RenormalizeResult
	first, ok, err := r.first(ctx, rg)
	if err != nil || !ok {
		return res, err
	}
	have, err := r.presentIDs(ctx, first.Stored.Add(-cmp.Or(r.ClockSlack, DefaultClockSlack)))
	if err != nil {
		return res, err
	}
	pending := make([]substate.Event, 0, cmp.Or(r.Batch, DefaultPublishBatch))
	for m, err := range r.Reader.Messages(ctx, substate.StreamRaw, "", rg) {
		if err != nil {
			return res, err
		}
		if res.Raw == 0 {
			res.FirstSeq = m.Seq
		}
		res.Raw, res.LastSeq = res.Raw+1, m.Seq
		events := r.mapRaw(m, &res)
		for i := range events {
			if have.has(events[i].ID) {
				res.Present++
				continue
			}
			have.add(events[i].ID)
			pending = append(pending, events[i])
		}
		if len(pending) >= cap(pending) {
			if err := r.publish(ctx, &pending, &res); err != nil {
				return res, err
			}
		}
	}
	return res, r.publish(ctx, &pending, &res)
}

// first returns the first raw message of rg, if there is one.
func (r *Renormalizer) first(ctx context.Context, rg Range) (Message, bool, error) {
	for m, err := range r.Reader.Messages(ctx, substate.StreamRaw, "", rg) {
		return m, err == nil, err
	}
	return Message{}, false, nil
}

// presentIDs collects the ids of the events stored since a time.
func (r *Renormalizer) presentIDs(ctx context.Context, since time.Time) (*idSet, error) {
	set := newIDSet()
	for m, err := range r.Reader.Messages(ctx, substate.StreamEvents, "", Range{Since: since}) {
		if err != nil {
			return nil, fmt.Errorf("collect event ids: %w", err)
		}
		set.add(m.Header.Get(substate.HeaderMsgID))
	}
	return set, nil
}

// mapRaw maps one raw message to the events the normalizer would publish.
func (r *Renormalizer) mapRaw(m Message, res *RenormalizeResult) []substate.Event {
	raw := RawEventOf(m)
	data, err := r.Mapper.Map(raw)
	for i := 0; err == nil && i < len(data); i++ {
		err = data[i].Validate()
	}
	if err != nil {
		if res.Rejected++; res.FirstRejection == "" {
			res.FirstRejection = fmt.Sprintf("%s sequence %d: %v", substate.StreamRaw, m.Seq, err)
		}
		return nil
	}
	events := make([]substate.Event, len(data))
	for i := range data {
		events[i] = substate.NewEvent(r.EventID(raw, i), data[i])
		events[i].Raw = substate.RawRef{Seq: m.Seq, ID: raw.ID}
	}
	res.Mapped += len(events)
	return events
}

func (r *Renormalizer) publish(ctx context.Context, pending *[]substate.Event, res *RenormalizeResult) error {
	if len(*pending) == 0 {
		return nil
	}
	if !r.DryRun {
		if err := r.Events.PublishEvents(ctx, *pending); err != nil {
			return fmt.Errorf("renormalize: %w", err)
		}
	}
	res.Published += len(*pending)
	*pending = (*pending)[:0]
	return nil
}

// idSet holds event ids; the normalizer's ids (64 hex digits) take 32 bytes.
type idSet struct {
	hashes map[[32]byte]struct{}
	other  map[string]struct{}
}

func newIDSet() *idSet {
	return &idSet{hashes: make(map[[32]byte]struct{}), other: make(map[string]struct{})}
}

func (s *idSet) add(id string) {
	if h, ok := hash(id); ok {
		s.hashes[h] = struct{}{}
	} else {
		s.other[id] = struct{}{}
	}
}

// size is how many ids the set holds.
func (s *idSet) size() int { return len(s.hashes) + len(s.other) }

func (s *idSet) has(id string) bool {
	if h, ok := hash(id); ok {
		_, found := s.hashes[h]
		return found
	}
	_, found := s.other[id]
	return found
}

func hash(id string) ([32]byte, bool) {
	var h [32]byte
	if len(id) != 64 {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(id))
	return h, err == nil && hex.EncodeToString(h[:]) == id // lower case only: one id, one key
}
