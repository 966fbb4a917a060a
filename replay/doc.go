// Package replay reads substate's retained streams back in order: the
// canonical events of SUBSTATE_EVENTS (all of them or one tenant's) and the
// provider payloads of SUBSTATE_RAW they were mapped from. On that it builds
// the tools an audit needs: a tenant's history, each event folded with the
// projector's rules (state.Fold); a rebuild that folds the events into a
// fresh view through the same ViewStore.Apply the live projector uses, into
// a view file of its own; a comparison of two views field by field, and
// the verification of a running worker's view against the replay of what
// it applied; a check of every event against its raw evidence; and a
// renormalizer that maps the raw stream again into the events stream
// without duplicating anything; and the live side of reading: a stream
// followed as it grows (Reader.Follow, EventFeed, every follower waiting
// on one Tail) and the dead letters page by page (DeadLetters).
//
// Reads use batched direct gets, which hold no consumer on the server, so
// they run beside a live worker without disturbing its durable consumers,
// any number of them leave the streams' consumers as they were, and each
// ends at the stream's last sequence as of its start (a follow reads on
// from there once the stream grows). The one exception is the evidence
// check, which visits every message of a range: it reads with scans
// (Reader.Scan), each an ephemeral consumer of its own that it deletes
// when it ends.
package replay
