package substate

import (
	"context"
	"iter"
	"time"
)

// EventStreamQuery says which canonical events a follower of
// SUBSTATE_EVENTS reads and where it starts: after AfterSeq, else at the
// first event stored at or after Since, else at the oldest retained event
// with FromStart, else with the events stored from now on.
type EventStreamQuery struct {
	TenantID  string // one tenant's events; "" for every tenant's
	AfterSeq  uint64
	Since     time.Time
	FromStart bool
}

// StoredEvent is one message of SUBSTATE_EVENTS: its stream sequence and
// the CloudEvent as stored (JSON; an event that is not one is passed on
// as it is, for the reader to report).
type StoredEvent struct {
	Seq  uint64
	Data []byte
}

// EventFollower follows SUBSTATE_EVENTS: it yields the events from the
// query's start, then each new one as the stream stores it, until ctx is
// done (and then ends without an error). An error is yielded once, last.
type EventFollower interface {
	FollowEvents(ctx context.Context, q EventStreamQuery) iter.Seq2[StoredEvent, error]
}
