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
// without duplicating anything.
//
// Reads use ordered consumers (ephemeral, in memory, no acknowledgements),
// so they run beside a live worker without disturbing its durable
// consumers, and end at the stream's last sequence as of their start.
package replay
