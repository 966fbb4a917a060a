package actions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// Backoff after throttling: the nominal wait after a lane's first
// throttled call, and its cap (spread with jitter, see timex.Backoff).
const (
	ThrottleBase = time.Second
	ThrottleMax  = time.Minute
)

// lane is one provider's (or the dead letters') limits at run time,
// shared by every job a runner runs: a token bucket per API, and a
// backoff every call of the lane waits out after the provider throttled
// one.
type lane struct {
	name    string
	limits  Limits
	costs   map[string][]string // the API calls of each operation
	buckets map[string]*rate.Limiter
	backoff timex.Backoff

	mu        sync.Mutex
	throttles int       // throttled answers in a row
	until     time.Time // no call before
}

func newLane(name string, l Limits, costs map[string][]string, backoff timex.Backoff) *lane {
	if backoff.Base <= 0 {
		backoff = timex.Backoff{Base: ThrottleBase, Max: ThrottleMax}
	}
	ln := &lane{name: name, limits: l, costs: costs, buckets: map[string]*rate.Limiter{}, backoff: backoff}
	for api, b := range l.APIs {
		if b.Rate > 0 {
			ln.buckets[api] = rate.NewLimiter(rate.Limit(b.Rate), max(b.Size, 1))
		}
	}
	return ln
}

// wait waits until the lane may make the calls of one operation: out of
// a throttling backoff, and a token of each API's bucket.
func (l *lane) wait(ctx context.Context, op string) error {
	if err := timex.Sleep(ctx, l.backingOff()); err != nil {
		return err
	}
	for _, api := range l.costs[op] {
		if b := l.buckets[api]; b != nil {
			if err := b.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// backingOff returns how long the lane still backs off.
func (l *lane) backingOff() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.until)
}

// throttled starts the lane's backoff after a throttled call, or
// lengthens it when the call was made after the last backoff ended (calls
// answered while it runs were sent before it: they do not lengthen it),
// and returns how long the lane still backs off.
func (l *lane) throttled() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Before(l.until) {
		return l.until.Sub(now)
	}
	l.throttles++
	d := l.backoff.Delay(l.throttles)
	l.until = now.Add(d)
	return d
}

// answered resets the lane's backoff after a call the provider answered
// without throttling it: the next throttled call backs off from the
// start again.
func (l *lane) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.throttles = 0
}

// note notes the answer of any call of the lane's (a description before
// or after an action too): a throttled one starts the lane's backoff, one
// the provider answered otherwise resets it. It returns err.
func (l *lane) note(err error) error {
	switch {
	case substate.ErrorCode(err) == substate.ETHROTTLED:
		l.throttled()
	case substate.ErrorCode(err) == substate.EUNAVAILABLE, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// no answer: it says nothing of throttling
	default:
		l.answered()
	}
	return err
}

// waiting says why the lane holds its calls back, or "".
func (l *lane) waiting() string {
	if d := l.backingOff(); d > 0 {
		return fmt.Sprintf("%s throttles: backing off for %s", l.name, d.Round(100*time.Millisecond))
	}
	return ""
}

// limited is an ExecutionOperator whose every call waits for its lane,
// and tells the operator that the lane backs off a throttled call.
type limited struct {
	op   substate.ExecutionOperator
	lane *lane
}

var _ substate.IdempotentOperator = limited{}

// DescribeExecution describes, in turn.
func (o limited) DescribeExecution(ctx context.Context, id string) (substate.ExecutionInfo, error) {
	if err := o.lane.wait(ctx, opDescribe); err != nil {
		return substate.ExecutionInfo{}, err
	}
	info, err := o.op.DescribeExecution(substate.WithCallerBackoff(ctx), id)
	return info, o.lane.note(err)
}

// StopExecution stops, in turn.
func (o limited) StopExecution(ctx context.Context, id string, opts substate.StopOptions) error {
	if err := o.lane.wait(ctx, string(substate.ActionStop)); err != nil {
		return err
	}
	return o.lane.note(o.op.StopExecution(substate.WithCallerBackoff(ctx), id, opts))
}

// RetryExecution retries, in turn.
func (o limited) RetryExecution(ctx context.Context, id string) error {
	if err := o.lane.wait(ctx, string(substate.ActionRetry)); err != nil {
		return err
	}
	return o.lane.note(o.op.RetryExecution(substate.WithCallerBackoff(ctx), id))
}

// RestartExecution restarts, in turn.
func (o limited) RestartExecution(ctx context.Context, id string) (string, error) {
	if err := o.lane.wait(ctx, string(substate.ActionRestart)); err != nil {
		return "", err
	}
	id, err := o.op.RestartExecution(substate.WithCallerBackoff(ctx), id)
	return id, o.lane.note(err)
}

// limitedPoller is a StatusPoller whose every poll (the status published
// after an action) waits for its lane, as the lane's other calls do.
type limitedPoller struct {
	p    substate.StatusPoller
	lane *lane
}

// Poll polls, in turn.
func (o limitedPoller) Poll(ctx context.Context, id string, withHistory bool) (substate.RawEvent, error) {
	if err := o.lane.wait(ctx, opPoll); err != nil {
		return substate.RawEvent{}, err
	}
	raw, err := o.p.Poll(substate.WithCallerBackoff(ctx), id, withHistory)
	return raw, o.lane.note(err)
}

// Idempotent is the wrapped operator's.
func (o limited) Idempotent(a substate.ExecutionAction) bool {
	idem, ok := o.op.(substate.IdempotentOperator)
	return ok && idem.Idempotent(a)
}
