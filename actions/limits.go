package actions

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/substatehq/substate"
)

// Bucket is a token bucket: up to Size calls at once, refilled at Rate a
// second.
type Bucket = substate.APIBucket

// Limits are one lane's limits: how many members it acts on at once, and
// a token bucket per provider API.
type Limits struct {
	Concurrency int
	APIs        map[string]Bucket
}

// Operations of a lane, which cost provider API calls (costs).
const (
	opDescribe = substate.OpDescribe
	opPoll     = substate.OpPoll
	opRequeue  = "requeue"
)

// engineRules are the built-in engine's rules: it runs in the worker, 200
// actions a second, one call each.
var engineRules = substate.ProviderRules{
	Concurrency: 8,
	APIs:        map[string]Bucket{"engine": {Size: 200, Rate: 200}},
	Costs: map[string][]string{
		opDescribe:                     {"engine"},
		string(substate.ActionStop):    {"engine"},
		string(substate.ActionRetry):   {"engine"},
		string(substate.ActionRestart): {"engine"},
	},
}

// deadLetterLimits are the requeue lane's: requeues publish to JetStream,
// 500 a second.
var deadLetterLimits = Limits{Concurrency: 4, APIs: map[string]Bucket{"requeue": {Size: 500, Rate: 500}}}

// rulesOf returns a provider's rules: those rules gives, else the built-in
// engine's own, else none (its operations cost nothing and only a failed
// execution can be retried).
func rulesOf(rules map[substate.Provider]substate.ProviderRules, p substate.Provider) substate.ProviderRules {
	if r, ok := rules[p]; ok {
		return r
	}
	if p == substate.ProviderEngine {
		return engineRules
	}
	return substate.ProviderRules{}
}

// DefaultLimits returns each lane's limits: a lane for each provider of
// rules with the concurrency and API buckets its rules give (the
// providers' packages know their quotas), the built-in engine's and the
// dead letters'. A job shares a provider's quotas with the worker's
// poller and every other caller, so it can still be throttled: it then
// backs off (see lane).
func DefaultLimits(rules map[substate.Provider]substate.ProviderRules) map[string]Limits {
	limits := map[string]Limits{substate.LaneDeadLetters: deadLetterLimits}
	for _, p := range append(slices.Collect(maps.Keys(rules)), substate.ProviderEngine) {
		r := rulesOf(rules, p)
		limits[string(p)] = Limits{Concurrency: r.Concurrency, APIs: maps.Clone(r.APIs)}
	}
	return limits
}

// ParseLimit applies one setting to limits: "LANE/API=SIZE/RATE" sets an
// API's token bucket, "LANE=N" the lane's concurrency (as
// --action-limit gives them).
func ParseLimit(limits map[string]Limits, s string) error {
	name, value, ok := strings.Cut(s, "=")
	lane, api, hasAPI := strings.Cut(name, "/")
	l, known := limits[lane]
	switch {
	case !ok:
		return fmt.Errorf("action limit %q: want LANE=CONCURRENCY or LANE/API=BUCKET/RATE", s)
	case !known:
		return fmt.Errorf("action limit %q: unknown lane %q (want %s)", s, lane, strings.Join(slices.Sorted(maps.Keys(limits)), ", "))
	case !hasAPI:
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("action limit %q: the concurrency must be a positive integer", s)
		}
		l.Concurrency = n
	default:
		b, err := parseBucket(value)
		if err != nil {
			return fmt.Errorf("action limit %q: %w", s, err)
		}
		l.APIs = maps.Clone(l.APIs)
		l.APIs[api] = b
	}
	limits[lane] = l
	return nil
}

// parseBucket reads "SIZE/RATE".
func parseBucket(v string) (Bucket, error) {
	size, rate, ok := strings.Cut(v, "/")
	n, err1 := strconv.Atoi(size)
	r, err2 := strconv.ParseFloat(rate, 64)
	if !ok || err1 != nil || err2 != nil || n < 1 || r <= 0 {
		return Bucket{}, fmt.Errorf("want BUCKET/RATE, such as 500/25 (positive numbers)")
	}
	return Bucket{Size: n, Rate: r}, nil
}

// laneCosts returns the API calls of each operation of a lane: a
// requeue's one publish, or what its provider's rules say.
func laneCosts(rules map[substate.Provider]substate.ProviderRules, lane string) map[string][]string {
	if lane == substate.LaneDeadLetters {
		return map[string][]string{opRequeue: {"requeue"}}
	}
	return rulesOf(rules, substate.Provider(lane)).Costs
}

// bucketOf returns the bucket of a lane's API; an API without one is not
// limited.
func (l Limits) bucketOf(api string) (Bucket, bool) {
	b, ok := l.APIs[api]
	return b, ok && b.Rate > 0
}

// concurrency is the lane's concurrency, at least one.
func (l Limits) concurrency() int { return max(cmp.Or(l.Concurrency, 1), 1) }
