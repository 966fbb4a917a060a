package httpapi

import (
	"context"
	"net/http"
	"sync"

	"github.com/substatehq/substate"
)

// MaxHistoryReadsPerCaller is how many history reads one caller runs at
// once. The worker runs a few more in all (replay.MaxConcurrentReads) and
// a caller's further reads wait for one of its own turns, not for the
// worker's: a caller that floods history reads holds at most this many of
// those, and the reads of others are served meanwhile.
const MaxHistoryReadsPerCaller = 4

// callerTurns bounds what each caller runs at once. The zero value is
// ready to use; a caller's entry lives while it has a request waiting or
// running, so the map holds no more callers than there are requests.
type callerTurns struct {
	mu sync.Mutex
	of map[string]*callerTurn
}

type callerTurn struct {
	held  chan struct{} // a token per request running
	users int           // requests running or waiting
}

// acquire waits until caller runs fewer than limit requests, or ctx is done,
// and returns the function that gives the turn back.
func (t *callerTurns) acquire(ctx context.Context, caller string, limit int) (release func(), err error) {
	t.mu.Lock()
	if t.of == nil {
		t.of = map[string]*callerTurn{}
	}
	c := t.of[caller]
	if c == nil {
		c = &callerTurn{held: make(chan struct{}, limit)}
		t.of[caller] = c
	}
	c.users++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if c.users--; c.users == 0 {
			delete(t.of, caller)
		}
		t.mu.Unlock()
	}
	select {
	case c.held <- struct{}{}:
		return func() { <-c.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// caller is whom per-caller bounds count a request of p by: the key's
// name, or, for the anonymous caller of a loopback worker without keys,
// the client's address (an IPv4 address, an IPv6 /64, as the per-client
// connection cap counts).
func (s *Server) caller(r *http.Request, p Principal) string {
	if s.who(p) != LoopbackOperator {
		return "key " + p.Name
	}
	return "address " + remoteKey(r.RemoteAddr)
}

// historyTurn waits for one of the caller's history turns.
func (s *Server) historyTurn(r *http.Request, p Principal, tenant string) (release func(), err error) {
	release, err = s.historyTurns.acquire(r.Context(), s.caller(r, p), MaxHistoryReadsPerCaller)
	if err != nil {
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "history of %q: gave up waiting for one of the %d history reads a caller may run at once", tenant, MaxHistoryReadsPerCaller)
	}
	return release, nil
}
