// Package state is the tenant view: it applies canonical sub-state events
// to one record per tenant in a bbolt file, with the projection rules, and
// answers queries from indexes by sub-state, error, retry count, last
// update and error fingerprint, and group counts (Groups) from counters
// kept in the same transactions.
//
// # Rules
//
// ApplyEvent is the one rule function; DB.Apply runs every event through
// it. A tenant's record holds its public view and the execution it follows
// (id, start time, revision of the newest applied event), which outlives
// the view's fields, so a late event of a finished execution stays stale.
//
//   - Order. An event of the followed execution applies only when its
//     revision is greater; equal revisions are duplicates and the first one
//     wins. An event of another execution replaces the followed one when
//     that execution started later; equal start times are broken by the
//     larger execution id in byte order, and an unknown start time counts
//     as the earliest. Otherwise it is stale. A newer revision of the same
//     execution applies even after a terminal event: a Step Functions
//     redrive goes failed → running → succeeded under one id.
//   - Retry count. A count the provider reported is taken, but never
//     below the count the view has for the execution (Restate counts again
//     after a resume). An event without a count keeps the view's count, so
//     a row that lacks the column never lowers it; a failure followed by a
//     retry adds one, once: entering backing-off adds it, and so does
//     running straight after an error.
//   - Error message. Running and succeeded show none (a Restate row keeps
//     its last failure while the next attempt runs: that is history).
//     Waiting shows the event's own message, if any. Error, backing-off and
//     failed take the event's message and keep the previous one when the
//     event has none, which is how failed preserves it.
//   - Terminal. Succeeded clears the view's execution id, retry count,
//     error and step; failed keeps them. A newer execution starts from an
//     empty view.
//   - Step. An event that names a step sets it (cut to MaxStep bytes); one
//     that names none keeps the view's. So does the workflow type, which
//     success keeps.
//   - Error type and fingerprint move with the error message.
//   - Time in sub-state. WorkflowSubStateSince is the event's OccurredAt
//     (else its ExecutionStartedAt) when the sub-state changes or a newer
//     execution starts, and kept otherwise: from the stream, never from a
//     clock, so a rebuild finds it again.
//   - Dirty check. A record is written when the sub-state, its verb form
//     or time, the retry count, the error, the step, the workflow type, the
//     provider or the execution changes: every field an index or a group
//     counter holds, so a record held back by an unchanged event keeps its
//     index keys. The step counts so that a person watching sees the workflow
//     move from state to state. The
//     verb counts because consumers may treat it as the state (failed and
//     cancelled are both the failed sub-state). The execution is the
//     followed one: a newer execution first seen already succeeded leaves
//     the public fields as they were but must be written, so it is a change.
//
// # Deadlines
//
// With SLOs set (SetSLOs), every change also sets the tenant's deadline
// (substate.SLOs.Deadline, from WorkflowSubStateSince and the execution's
// start) and its key in the timer index, in the change's transaction; a
// terminal tenant holds none. A tenant that is stuck stays stuck while a
// change leaves its deadline where it was. ExpireDeadlines marks the due
// tenants stuck (up to a time the projector knows every event of to be
// applied) and writes their stuck changes into the outbox;
// writeOutbox adds an unstuck message after a change that ended stuck.
// RecomputeDeadlines gives the tenants that are neither terminal nor stuck
// the deadlines of new SLOs, in bounded transactions. The record keeps the
// sequence of its last change (Record.Seq), which a stuck message carries.
//
// # Unchanged events
//
// An event that is newer but changes nothing the dirty check looks at
// opens no write transaction. It still moves the record's revision (so a
// late older event stays out), provider state, status and last event time;
// the record is held in memory, shown by every query at once, and written
// with the next commit, by Sync and by Close, or when PendingLimit tenants
// are held. The checkpoint moves only with a commit: a batch of unchanged
// events leaves it where it was, and the applied sequence moves in memory
// so that a redelivery is still skipped. The projector acks such a batch
// like any other. If the process dies before the next commit, nothing is
// lost: the stored checkpoint is behind what the durable consumer had
// acknowledged, so at start the worker repositions the consumer after the
// checkpoint (bus.ConsumerFrom) and the held events are delivered again.
//
// LastEventAt is the time of the newest applied event, unchanged or not;
// Active serves the reconciler from it. A poll that finds nothing new maps
// to an event with the same revision, which is stale and moves nothing, so
// the reconciler remembers when it last asked about a run itself.
// UpdatedAt is the clock's time of the last change.
//
// # Order of arrival
//
// For any order in which a tenant's events arrive, the view's execution,
// sub-state, verb, status, provider, provider state and last event time
// are those the newest event of the newest execution decides. The retry
// count and error message are too when every event reports its count and
// every error, backing-off and failed event its message, and whenever each
// execution's events arrive in order. Otherwise a reordered stream can
// lose an inferred retry: the error event arriving after the running that
// followed it is stale, so its transition is never seen. TestFoldProperty
// checks exactly these promises.
//
// # Storage
//
// Buckets: tenants (id → record), by-sub-state (code, id), with-error (id),
// by-retry (8-byte big-endian count, id), by-updated, the group buckets
// (groupkeys.go), the deadline buckets (deadline.go) and meta (checkpoint,
// schema, sub-state counts, the SLOs' digest). A file of schema 1 gets its
// group buckets built from its records on Open.
// The indexes hold every tenant, so a retry-count listing highest first is
// a reverse cursor walk that stops at the minimum. Records use a compact
// versioned binary encoding, several times smaller and faster than JSON
// (BenchmarkRecordCodec). Listings page with opaque tokens holding the
// last index key and a fingerprint of the filter; a token from another
// filter or not from this store is an EINVALID error.
//
// # Batches
//
// Apply skips sequences at or below the last applied one, rejects a batch
// holding an invalid event with EINVALID before applying any of it (the
// projector validates events as it decodes them), and logs each committed
// change through LogChange when Logger is set.
package state
