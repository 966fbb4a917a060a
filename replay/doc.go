// Package replay reads substate's retained streams back in order: the
// canonical events of SUBSTATE_EVENTS (all of them or one tenant's) and the
// provider payloads of SUBSTATE_RAW they were mapped from. On that it builds
// the tools an audit needs: a rebuild that folds the events into a fresh
// view through the same ViewStore.Apply the live projector uses, a
// comparison of two views field by field, and a renormalizer that maps the
// raw stream again into the events stream without duplicating anything.
//
// Reads use ordered consumers (ephemeral, in memory, no acknowledgements),
// so they run beside a live worker without disturbing its durable
// consumers, and end at the stream's last sequence as of their start.
package replay
