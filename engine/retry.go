package engine

import (
	"math"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

// retryPolicy is a Task's retry block.
type retryPolicy struct {
	maxAttempts int           // retries after the first try
	multiplier  float64       // backoffMultiplier, default 2
	initial     time.Duration // initialDelaySeconds, default 1s
	maxDelay    time.Duration // maxDelaySeconds, 0: no cap
	errorTypes  []string      // errorTypes, default ["*"]
}

// Retry defaults, used when a retry block leaves a field out.
const (
	defaultMaxAttempts  = 3
	defaultMultiplier   = 2.0
	defaultInitialDelay = time.Second
	// jitterSpread is the jitter: a delay d becomes up to d × (1 +
	// jitterSpread), never less than d.
	jitterSpread = 0.2
)

// defaultRetry is the policy applied to ServiceUnavailable when the task's
// own retry block does not match it (or there is none): three retries after
// one, two and four seconds, so a task service that is restarting does not
// fail the execution.
var defaultRetry = retryPolicy{
	maxAttempts: 3, multiplier: 2, initial: time.Second, maxDelay: 30 * time.Second,
	errorTypes: []string{ErrServiceUnavailable},
}

// retry parses a retry block.
func (p *parser) retry(n *yaml.Node, st string) *retryPolicy {
	r := &retryPolicy{maxAttempts: defaultMaxAttempts, multiplier: defaultMultiplier, initial: defaultInitialDelay, errorTypes: []string{"*"}}
	for _, f := range p.fields(n, st, "retry") {
		switch f.key {
		case "maxAttempts":
			if x, ok := p.number(f); ok {
				if x < 0 || x != math.Trunc(x) || x > 1000 {
					p.errorf(p.deref(f.val), st, "maxAttempts must be a whole number from 0 to 1000")
				}
				r.maxAttempts = int(x)
			}
		case "backoffMultiplier":
			if x, ok := p.number(f); ok {
				if x < 1 || x > 100 {
					p.errorf(p.deref(f.val), st, "backoffMultiplier must be from 1 to 100")
				}
				r.multiplier = x
			}
		case "initialDelaySeconds":
			r.initial, _ = p.seconds(f, true)
		case "maxDelaySeconds":
			r.maxDelay, _ = p.seconds(f, false)
		case "errorTypes":
			r.errorTypes = p.stringList(f)
		default:
			p.errorf(f.keyNode, st, "unknown field %q in retry (maxAttempts, backoffMultiplier, initialDelaySeconds, maxDelaySeconds, errorTypes)", f.key)
		}
	}
	return r
}

// stringList reads a list of non-empty strings.
func (p *parser) stringList(f field) []string {
	v := p.deref(f.val)
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.errorf(v, f.stateCtx, "%s must be a non-empty list of strings", f.key)
		return nil
	}
	var out []string
	for _, item := range v.Content {
		if s, ok := p.str(field{key: f.key + " entries", val: item, stateCtx: f.stateCtx}); ok {
			out = append(out, s)
		}
	}
	return out
}

// matches reports whether the policy applies to an error type.
func (r *retryPolicy) matches(errType string) bool {
	return matchAny(r.errorTypes, errType)
}

func matchAny(patterns []string, errType string) bool {
	for _, p := range patterns {
		if p == "*" || p == errType {
			return true
		}
	}
	return false
}

// delay returns the wait before retry number n (1 for the first retry):
// d = initial × multiplier^(n-1), capped by maxDelay, then spread upwards
// by up to jitterSpread with j in [0,1) (j = 0 leaves it unchanged) and
// capped again. The jitter never makes the wait shorter than d: a retry
// never comes before the delay the workflow configured.
func (r *retryPolicy) delay(n int, j float64) time.Duration {
	d := float64(r.initial) * math.Pow(r.multiplier, float64(max(n-1, 0)))
	limit := float64(r.maxDelay)
	if r.maxDelay <= 0 {
		limit = float64(24 * time.Hour)
	}
	d = math.Min(d, limit)
	return time.Duration(math.Min(d*(1+jitterSpread*min(max(j, 0), 1)), math.Max(d, limit)))
}

// retryFor returns the policy that governs a failed attempt of st with
// errType: the state's own when it matches, else the default for
// ServiceUnavailable, else nil.
func retryFor(st *state, errType string) *retryPolicy {
	if st.retry != nil && st.retry.matches(errType) {
		return st.retry
	}
	if defaultRetry.matches(errType) {
		return &defaultRetry
	}
	return nil
}

// catchFor returns the first catcher that matches errType, or nil.
func catchFor(st *state, errType string) *catcher {
	for i := range st.catch {
		if matchAny([]string{st.catch[i].errorType}, errType) {
			return &st.catch[i]
		}
	}
	return nil
}
