package stepfunctions

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"

	"github.com/substatehq/substate"
)

// Backoff after throttling: the nominal wait after the first throttled call
// of an API and its cap (the waits are spread over their upper half).
const (
	DefaultThrottleBase = time.Second
	DefaultThrottleMax  = time.Minute
)

// Operations the poller calls, as the SDK names them.
const (
	opDescribe = "DescribeExecution"
	opHistory  = "GetExecutionHistory"
)

// throttle is the backoff of one API while Step Functions throttles it.
type throttle struct {
	n     int       // throttled calls in a row
	since time.Time // when the first of them was answered
	until time.Time // no poll calls the API before
}

// throttledError is the ETHROTTLED error of a poll that did not call an API
// backing off (or whose call was throttled), with the wait left.
type throttledError struct {
	err   *substate.Error
	after time.Duration
}

// Error returns the message of the *substate.Error.
func (e *throttledError) Error() string { return e.err.Error() }

// RetryAfter returns how long the API still backs off.
func (e *throttledError) RetryAfter() time.Duration { return e.after }

// Unwrap returns the *substate.Error.
func (e *throttledError) Unwrap() error { return e.err }

// observeThrottling returns the client option that tells the provider how
// each attempt of each operation ended: the backoff of an API starts with a
// throttled answer and ends with any other answer. It sits below the SDK's
// retries, so it sees every attempt.
func (p *Provider) observeThrottling() func(*sfn.Options) {
	mw := middleware.FinalizeMiddlewareFunc("substateObserveThrottling", func(
		ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler,
	) (middleware.FinalizeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleFinalize(ctx, in)
		op := middleware.GetOperationName(ctx)
		switch code := ErrorCode(err); {
		case code == substate.ETHROTTLED:
			p.throttled(op)
		case err == nil || (code != substate.EUNAVAILABLE && code != substate.EINTERNAL):
			p.answered(op)
		}
		return out, md, err
	})
	return func(o *sfn.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(mw, middleware.After)
		})
	}
}

// noThrottleRetries is the per-call option of the poller's calls: the SDK
// does not retry a throttled attempt (the provider backs the API off
// instead, and the reconciler polls another execution), so a poll costs
// one call while Step Functions throttles. Other failures keep the SDK's
// retries, each attempt within the budget.
func noThrottleRetries(o *sfn.Options) {
	if o.Retryer != nil {
		o.Retryer = throttleNotRetried{retryerV2(o.Retryer)}
	}
}

// throttleNotRetried is a retryer that never retries a throttled attempt.
type throttleNotRetried struct{ aws.RetryerV2 }

// IsErrorRetryable is false for throttling, else the wrapped retryer's.
func (r throttleNotRetried) IsErrorRetryable(err error) bool {
	return ErrorCode(err) != substate.ETHROTTLED && r.RetryerV2.IsErrorRetryable(err)
}

// retryerV2 returns r as an aws.RetryerV2.
func retryerV2(r aws.Retryer) aws.RetryerV2 {
	if v, ok := r.(aws.RetryerV2); ok {
		return v
	}
	return retryerV1{r}
}

// retryerV1 adapts an aws.Retryer without GetAttemptToken.
type retryerV1 struct{ aws.Retryer }

// GetAttemptToken returns the initial token.
func (r retryerV1) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}

// backingOff returns how long the poller must still leave op alone.
func (p *Provider) backingOff(op string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.throttles[op]; t != nil {
		return max(t.until.Sub(p.Now()), 0)
	}
	return 0
}

// throttledErr is the error of a poll that leaves op alone while it backs
// off.
func (p *Provider) throttledErr(op string, cause error) error {
	wait := p.backingOff(op)
	e := substate.WrapError(substate.ETHROTTLED, cause, "stepfunctions: %s is throttled: backing off for %s", op, wait.Round(time.Millisecond))
	return &throttledError{err: e, after: wait}
}

// throttled starts or lengthens op's backoff after a throttled attempt.
func (p *Provider) throttled(op string) {
	p.mu.Lock()
	now := p.Now()
	t := p.throttles[op]
	if t == nil {
		t = &throttle{since: now}
		p.throttles[op] = t
	}
	t.n++
	d := p.Backoff.Delay(t.n)
	t.until = now.Add(d)
	n := t.n
	p.mu.Unlock()
	if p.OnBackoff != nil {
		p.OnBackoff(op, d)
	}
	log := p.logger().With("operation", op, "backoff", d.Round(time.Millisecond), "throttled_calls", n)
	if n == 1 {
		log.Warn("step functions throttles this API: the poller backs off it, with jitter, and polls the other executions in turn")
		return
	}
	log.Debug("step functions throttles this API again")
}

// answered ends op's backoff after an attempt Step Functions answered
// without throttling.
func (p *Provider) answered(op string) {
	p.mu.Lock()
	t := p.throttles[op]
	delete(p.throttles, op)
	now := p.Now()
	p.mu.Unlock()
	if t == nil {
		return
	}
	if p.OnBackoff != nil {
		p.OnBackoff(op, 0)
	}
	p.logger().Info("step functions answers this API again", "operation", op,
		"throttled_for", now.Sub(t.since).Round(time.Millisecond), "throttled_calls", t.n)
}

// fellBehind notes that a poll of arn returned its status without reading
// its history (the history API backs off).
func (p *Provider) fellBehind(arn string) {
	p.mu.Lock()
	_, known := p.behind[arn]
	p.behind[arn] = p.Now()
	if !known {
		if len(p.behind) == 1 {
			p.behindSince, p.behindTotal = p.Now(), 0
		}
		p.behindTotal++
	}
	n := len(p.behind)
	p.mu.Unlock()
	if known {
		return
	}
	p.reportBehind(n)
	if n == 1 {
		p.logger().Warn("step functions history reads fall behind: running executions are polled with DescribeExecution only while GetExecutionHistory backs off; their retries show once it answers")
	}
}

// caughtUp notes that arn's history was read, or need not be.
func (p *Provider) caughtUp(arn string) {
	p.mu.Lock()
	_, known := p.behind[arn]
	delete(p.behind, arn)
	n, total, since := len(p.behind), p.behindTotal, p.behindSince
	now := p.Now()
	p.mu.Unlock()
	if !known {
		return
	}
	p.reportBehind(n)
	if n == 0 {
		p.logger().Info("step functions history reads caught up: every execution polled without its history was read again",
			"executions", total, "behind_for", now.Sub(since).Round(time.Millisecond))
	}
}

func (p *Provider) reportBehind(n int) {
	if p.OnBehind != nil {
		p.OnBehind(n)
	}
}

// pruneBehind forgets the executions behind that were not polled for
// idle: they ended or left the view. Called with p.mu held.
func (p *Provider) pruneBehind(now time.Time, idle time.Duration) {
	n := len(p.behind)
	for arn, seen := range p.behind {
		if now.Sub(seen) >= idle {
			delete(p.behind, arn)
		}
	}
	if len(p.behind) == n {
		return
	}
	p.reportBehind(len(p.behind))
	if len(p.behind) == 0 {
		p.logger().Info("step functions history reads are no longer behind: the executions left unread were not polled for an hour (they ended or left the view)",
			"executions", n)
	}
}

func (p *Provider) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}
