package replay

import (
	"context"
	"encoding/json"
	"iter"
	"strconv"
	"strings"

	"github.com/substatehq/substate"
)

// EventFeed follows SUBSTATE_EVENTS for "substate events tail" and GET
// /v1/events: batched direct gets from the start asked for, then a Tail
// that every follower of the feed shares.
type EventFeed struct {
	Reader *Reader
	Tail   *Tail // of substate.StreamEvents
}

var _ substate.EventFollower = (*EventFeed)(nil)

// NewEventFeed returns the feed of the stream js reads.
func NewEventFeed(r *Reader) *EventFeed {
	return &EventFeed{Reader: r, Tail: &Tail{JS: r.JS, Stream: substate.StreamEvents}}
}

// FollowEvents yields the events q asks for, then each new one, until ctx
// is done.
func (f *EventFeed) FollowEvents(ctx context.Context, q substate.EventStreamQuery) iter.Seq2[substate.StoredEvent, error] {
	return func(yield func(substate.StoredEvent, error) bool) {
		var start Range
		switch {
		case q.AfterSeq > 0:
			start.FromSeq = q.AfterSeq + 1
		case !q.Since.IsZero():
			start.Since = q.Since
		case q.FromStart:
			start.FromSeq = 1
		default:
			_, last, _, err := f.Reader.Bounds(ctx, substate.StreamEvents)
			if err != nil {
				if ctx.Err() == nil {
					yield(substate.StoredEvent{}, err)
				}
				return
			}
			start.FromSeq = last + 1
		}
		var subject string
		if q.TenantID != "" {
			subject = substate.EventsSubject(q.TenantID)
		}
		for m, err := range f.Reader.Follow(ctx, substate.StreamEvents, subject, start, f.Tail) {
			if !yield(substate.StoredEvent{Seq: m.Seq, Data: m.Data}, err) || err != nil {
				return
			}
		}
	}
}

// Bounds of a page of dead letters.
const (
	DefaultDeadLetterLimit = 100
	MaxDeadLetterLimit     = 1000
	// maxDeadLetterPageBytes ends a page early once its payloads pass it
	// (a page holds at least one): a dead letter may be 1 MiB.
	maxDeadLetterPageBytes = 8 << 20
)

// DeadLetters reads SUBSTATE_DLQ for "substate events dlq" and GET
// /v1/deadletters, with every payload whole and as stored: whoever shows
// them redacts them.
type DeadLetters struct {
	Reader *Reader
}

var _ substate.DeadLetterReader = DeadLetters{}

// DeadLetters returns a page of the dead letters q selects, oldest first.
func (d DeadLetters) DeadLetters(ctx context.Context, q substate.DeadLetterQuery) (substate.DeadLetterPage, error) {
	limit := min(q.Limit, MaxDeadLetterLimit)
	if limit <= 0 {
		limit = DefaultDeadLetterLimit
	}
	var subject string
	if q.Stage != "" {
		subject = substate.DLQSubject(q.Stage)
	}
	page := substate.DeadLetterPage{DeadLetters: []substate.StoredDeadLetter{}}
	rg, bytes := Range{Since: q.Since}, 0
	if q.AfterSeq > 0 {
		rg.FromSeq = q.AfterSeq + 1
	}
	for m, err := range d.Reader.Messages(ctx, substate.StreamDLQ, subject, rg) {
		if err != nil {
			return page, err
		}
		if len(page.DeadLetters) == limit || len(page.DeadLetters) > 0 && bytes+len(m.Data) > maxDeadLetterPageBytes {
			page.NextAfterSeq = page.DeadLetters[len(page.DeadLetters)-1].Seq
			break
		}
		bytes += len(m.Data)
		page.DeadLetters = append(page.DeadLetters, DeadLetterOf(m))
	}
	return page, nil
}

// DeadLetterOf reads one message of SUBSTATE_DLQ, its payload whole.
func DeadLetterOf(m Message) substate.StoredDeadLetter {
	h := m.Header
	d := substate.StoredDeadLetter{
		Seq: m.Seq, Time: m.Stored.UTC(), Stage: h.Get(substate.HeaderDLQStage), Reason: h.Get(substate.HeaderDLQReason),
		Subject: h.Get(substate.HeaderDLQSubject), OriginalID: h.Get(substate.HeaderOriginalMsgID),
		TenantID: DeadLetterTenant(m.Data), Size: len(m.Data), Payload: m.Data,
	}
	d.SubjectSeq, _ = strconv.ParseUint(h.Get(substate.HeaderDLQSeq), 10, 64)
	if !json.Valid(m.Data) {
		d.Payload, _ = json.Marshal(strings.ToValidUTF8(string(m.Data), "\uFFFD"))
	}
	return d
}

// DeadLetterTenant is the tenant a dead payload names, where substate's
// own messages and the usual provider payloads carry it; "" when it names
// none.
func DeadLetterTenant(body []byte) string {
	var v struct {
		TenantID string `json:"tenantId"`
		Data     struct {
			TenantID string `json:"tenantId"`
		} `json:"data"`
		Detail struct {
			Input string `json:"input"`
		} `json:"detail"`
		TargetServiceKey string `json:"target_service_key"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	switch {
	case v.TenantID != "":
		return v.TenantID
	case v.Data.TenantID != "":
		return v.Data.TenantID
	case v.TargetServiceKey != "":
		return v.TargetServiceKey
	}
	var in struct {
		TenantID string `json:"tenantId"`
	}
	if json.Unmarshal([]byte(v.Detail.Input), &in) == nil {
		return in.TenantID
	}
	return ""
}
