package substate

// Revision orders the events of one execution: an event applies to the view
// only when its revision is greater than the last one applied for the same
// execution. Each provider fills it from its own order key:
//
//   - Step Functions: StepFunctionsRevision(redriveCount, rank, historyEventID),
//     where PENDING_REDRIVE ranks below RUNNING and RUNNING below the terminal statuses of the same redrive epoch
//     and a status read from history is ordered by its newest event id.
//   - Restate: the row's modified_at in Unix milliseconds.
//   - engine: the execution's emission sequence number.
//
// Revisions stay below 2^53 so they survive JSON consumers that use doubles.
type Revision uint64

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
func StepFunctionsRevision(redriveCount, rank int, eventID int64) Revision {
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
	return Revision(uint64(redriveCount)<<40 | uint64(rank&0xff)<<32 | uint64(eventID))
}
