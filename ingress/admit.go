package ingress

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/substatehq/substate"
)

// Admission bounds what the ingress takes on before it answers 429 with
// Retry-After (which EventBridge API destinations and Standard Webhooks
// senders retry): the raw events not yet normalized, and the events being
// published at this moment. Memory and the stream's backlog then stay
// bounded under any load instead of growing until something gives.
type Admission struct {
	// MaxBacklog is the most raw events SUBSTATE_RAW may hold unprocessed
	// (not yet delivered to the normalizer or not yet acknowledged by it);
	// 0 means no bound.
	MaxBacklog uint64
	// Backlog returns the current backlog, as last measured.
	Backlog func() uint64
	// MaxInFlight is the most events publishes may await at once across
	// requests; 0 means no bound.
	MaxInFlight int64
	// RetryAfter is what a 429 tells the sender to wait; 0 means 1 s.
	RetryAfter time.Duration

	inFlight atomic.Int64
}

// admit takes n events in flight, or returns the ETHROTTLED error that
// says which bound was passed. release gives them back.
func (a *Admission) admit(n int) (release func(), err error) {
	if a == nil {
		return func() {}, nil
	}
	if a.MaxBacklog > 0 && a.Backlog != nil {
		if b := a.Backlog(); b >= a.MaxBacklog {
			return nil, substate.Errorf(substate.ETHROTTLED, "%d raw events are waiting to be processed, the bound is %d: retry later", b, a.MaxBacklog)
		}
	}
	if a.MaxInFlight > 0 {
		if now := a.inFlight.Add(int64(n)); now > a.MaxInFlight && now > int64(n) {
			a.inFlight.Add(-int64(n))
			return nil, substate.Errorf(substate.ETHROTTLED, "%d events are being published, the bound is %d: retry later", now-int64(n), a.MaxInFlight)
		}
		return func() { a.inFlight.Add(-int64(n)) }, nil
	}
	return func() {}, nil
}

// retryAfter is the Retry-After header value of a 429, in whole seconds.
func (a *Admission) retryAfter() string {
	d := time.Second
	if a != nil && a.RetryAfter > 0 {
		d = a.RetryAfter
	}
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
