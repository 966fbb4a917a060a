// Package intern holds a bounded cache of short strings that decoders on
// the hot path share, so a value most records or events repeat (a verb, a
// status, a provider's state, a workflow or error type) is one string, not
// an allocation per decode.
package intern

import "sync/atomic"

// slots is a direct-mapped cache of short strings: each slot holds the last
// string that hashed to it. It is bounded (Slots strings of at most Max
// bytes), safe for concurrent decoders, and a miss costs what string(b)
// costs, so many distinct values only miss more often.
var slots [Slots]atomic.Pointer[string]

// The cache's bounds.
const (
	Slots = 1024
	Max   = 48
)

// Bytes returns string(b), from the cache when a slot holds it. The result
// never shares b's memory.
func Bytes(b []byte) string {
	if len(b) == 0 || len(b) > Max {
		return string(b)
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &slots[h%Slots]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
