package mapping

import (
	"time"

	"github.com/substatehq/substate"
)

// Ranks of a Step Functions status inside one redrive epoch.
const (
	RankPending  = 0 // PENDING_REDRIVE: a redrive was requested, nothing runs yet
	RankActive   = 1 // RUNNING (and states derived from it: backing-off, error)
	RankTerminal = 2 // SUCCEEDED, FAILED, TIMED_OUT, ABORTED
)

// StepFunctionsRevision packs a redrive epoch, a rank and a history event id
// (0 when the status came from an EventBridge event) into one Revision:
// redrive<<40 | rank<<32 | eventID. Event ids are capped at 2^32-1 (an
// execution history holds at most 25,000 events) and the redrive count at
// 8191 (Step Functions allows 1,000).
func StepFunctionsRevision(redriveCount, rank int, eventID int64) substate.Revision {
	if redriveCount < 0 {
		redriveCount = 0
	}
	if redriveCount > 8191 {
		redriveCount = 8191
	}
	if eventID < 0 {
		eventID = 0
	}
	if eventID > 1<<32-1 {
		eventID = 1<<32 - 1
	}
	return substate.Revision(uint64(redriveCount)<<40 | uint64(rank&0xff)<<32 | uint64(eventID))
}

// Ranks of a Restate status among the rows of one invocation that share a
// modified_at: Restate does not move modified_at while an attempt runs,
// fails and waits for its retry, so the status orders those rows.
const (
	RestateRankQueued     = 0 // pending, scheduled, ready: not running
	RestateRankRunning    = 1 // running: an attempt is in flight
	RestateRankBackingOff = 2 // backing-off: the attempt failed, a retry waits
	RestateRankSettled    = 3 // suspended, paused, completed
)

// restateEpoch is the origin of the time part of a Restate revision.
var restateEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// RestateRevision packs a row's modified_at, its attempt (retry_count:
// the attempt number, 1 for the first try; 0 when the row has none) and
// the rank of its status into one Revision: the milliseconds since
// 2020-01-01 (40 bits, until 2054) << 13, then a bit set for the settled
// statuses, the attempt (10 bits, capped at 1023) << 2 and the rank.
// Within one modified_at a settled row (suspended, paused, completed: they
// carry no retry_count) is newer than any attempt, a later attempt is
// newer than an earlier one, and within one attempt backing-off is newer
// than running.
func RestateRevision(modifiedAt time.Time, attempt, rank int) substate.Revision {
	ms := max(modifiedAt.Sub(restateEpoch).Milliseconds(), 0)
	ms = min(ms, 1<<40-1)
	if rank == RestateRankSettled {
		return substate.Revision(uint64(ms)<<13 | 1<<12 | uint64(rank))
	}
	attempt = min(max(attempt, 0), 1<<10-1)
	return substate.Revision(uint64(ms)<<13 | uint64(attempt)<<2 | uint64(rank&3))
}

// RestateStopCauseRevision is the revision of a settled Restate row that
// substate published with the cause of its own stop (HeaderStopCause): one
// step above the same row without the cause, so the row with the cause
// wins whichever of the two arrives first, and below any row with a later
// modified_at. A settled revision's attempt bits are otherwise unused.
func RestateStopCauseRevision(modifiedAt time.Time) substate.Revision {
	return RestateRevision(modifiedAt, 0, RestateRankSettled) + 1<<2
}
