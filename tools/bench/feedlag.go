package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// feedLag measures what a reader of the change feed waits: for each
// status change of the load, the time from its request to its change on
// SUBSTATE_CHANGES. It reads the feed with a core subscription on the
// bench's own server, so it holds no consumer and costs the worker
// nothing; a change is matched to its request by the execution and
// provider state of the view it made (see keyOf), the execution of the
// view before it for a finished run.
type feedLag struct {
	sent []atomic.Int64 // by key: unix nanoseconds of the first send, 0 = not sent
	seen []atomic.Bool  // by key: its change came already

	mu        sync.Mutex
	latencies []time.Duration
	sub       *nats.Subscription
}

// watchFeed subscribes to the change feed on nc for status changes with
// keys below keys.
func watchFeed(nc *nats.Conn, keys int) (*feedLag, error) {
	l := &feedLag{sent: make([]atomic.Int64, keys), seen: make([]atomic.Bool, keys)}
	sub, err := nc.Subscribe(substate.SubjectChangesPrefix+">", l.receive)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil { // a slow reader must not drop changes
		_ = sub.Unsubscribe()
		return nil, err
	}
	l.sub = sub
	return l, nil
}

// markSent records the send time of a status change, once.
func (l *feedLag) markSent(e benchEvent) {
	if k := e.key(); k >= 0 && k < len(l.sent) {
		l.sent[k].CompareAndSwap(0, time.Now().UnixNano())
	}
}

// receive notes the lag of a change whose request was sent.
func (l *feedLag) receive(m *nats.Msg) {
	now := time.Now().UnixNano()
	ce, err := substate.UnmarshalChangeEvent(m.Data)
	if err != nil {
		return // not a change of the load: the lag is of those only
	}
	v := &ce.Data.New
	exec := v.WorkflowExecutionID
	if exec == "" { // a finished run leaves the view without one: it was the old view's
		exec = ce.Data.Old.WorkflowExecutionID
	}
	k := keyOf(&substate.EventData{Provider: v.Provider, ExecutionID: exec, ProviderState: v.ProviderState})
	if k < 0 || k >= len(l.sent) || l.seen[k].Swap(true) {
		return
	}
	if sent := l.sent[k].Load(); sent > 0 {
		l.mu.Lock()
		l.latencies = append(l.latencies, time.Duration(now-sent))
		l.mu.Unlock()
	}
}

// stop waits until n changes were seen or a few seconds have passed (the
// feed publishes after the view's commit, which the caller waited for),
// ends the subscription and returns the latencies seen.
func (l *feedLag) stop(n int) latency {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		got := len(l.latencies)
		l.mu.Unlock()
		if got >= n {
			break
		}
	}
	_ = l.sub.Unsubscribe()
	l.mu.Lock()
	defer l.mu.Unlock()
	return latencyOf(l.latencies)
}
