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
type Bucket struct {
	Size int
	Rate float64
}

// Limits are one lane's limits: how many members it acts on at once, and
// a token bucket per provider API.
type Limits struct {
	Concurrency int
	APIs        map[string]Bucket
}

// Operations of a lane, which cost provider API calls (apiCosts).
const (
	opDescribe = "describe"
	opPoll     = "poll"
	opRequeue  = "requeue"
)

// apiCosts are the provider API calls each operation of a lane makes:
// Step Functions' describe reads DescribeExecution and the newest history
// events, its poll (the status published after an action) the same, its
// restart describes the execution for its input and starts a new one;
// Restate's describe reads the invocation's row and, for one that failed,
// its journal; every other call is one.
var apiCosts = map[string]map[string][]string{
	string(substate.ProviderStepFunctions): {
		opDescribe:                     {"DescribeExecution", "GetExecutionHistory"},
		opPoll:                         {"DescribeExecution", "GetExecutionHistory"},
		string(substate.ActionStop):    {"StopExecution"},
		string(substate.ActionRetry):   {"RedriveExecution"},
		string(substate.ActionRestart): {"DescribeExecution", "StartExecution"},
	},
	string(substate.ProviderRestate): {
		opDescribe:                     {"admin", "admin"},
		opPoll:                         {"admin"},
		string(substate.ActionStop):    {"admin"},
		string(substate.ActionRetry):   {"admin"},
		string(substate.ActionRestart): {"admin"},
	},
	string(substate.ProviderEngine): {
		opDescribe:                     {"engine"},
		string(substate.ActionStop):    {"engine"},
		string(substate.ActionRetry):   {"engine"},
		string(substate.ActionRestart): {"engine"},
	},
	substate.LaneDeadLetters: {opRequeue: {"requeue"}},
}

// largeRegions are the AWS regions where Step Functions' quotas are
// higher.
var largeRegions = []string{"us-east-1", "us-west-2", "eu-west-1"}

// DefaultLimits returns each lane's limits. Step Functions' buckets are
// its documented per-account API quotas for the region (those of most
// regions when region is not one of the three large ones); RedriveExecution,
// not in the table they are from, gets StopExecution's. The job shares
// them with the worker's poller and every other caller of the account,
// so it can still be throttled: it then backs off (see lane). Restate's
// admin API is one server: a bounded concurrency and 100 calls a second.
// The engine runs in the worker: 200 actions a second. Requeues publish
// to JetStream: 500 a second.
func DefaultLimits(region string) map[string]Limits {
	sfn := map[string]Bucket{
		"DescribeExecution": {250, 10}, "GetExecutionHistory": {400, 20},
		"StopExecution": {500, 25}, "RedriveExecution": {500, 25}, "StartExecution": {800, 150},
	}
	if slices.Contains(largeRegions, region) {
		sfn = map[string]Bucket{
			"DescribeExecution": {300, 15}, "GetExecutionHistory": {400, 20},
			"StopExecution": {1000, 200}, "RedriveExecution": {1000, 200}, "StartExecution": {1300, 300},
		}
	}
	return map[string]Limits{
		string(substate.ProviderStepFunctions): {Concurrency: 16, APIs: sfn},
		string(substate.ProviderRestate):       {Concurrency: 4, APIs: map[string]Bucket{"admin": {100, 100}}},
		string(substate.ProviderEngine):        {Concurrency: 8, APIs: map[string]Bucket{"engine": {200, 200}}},
		substate.LaneDeadLetters:               {Concurrency: 4, APIs: map[string]Bucket{"requeue": {500, 500}}},
	}
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

// costs returns the API calls of one operation of a lane.
func costs(lane, op string) []string { return apiCosts[lane][op] }

// bucketOf returns the bucket of a lane's API; an API without one is not
// limited.
func (l Limits) bucketOf(api string) (Bucket, bool) {
	b, ok := l.APIs[api]
	return b, ok && b.Rate > 0
}

// concurrency is the lane's concurrency, at least one.
func (l Limits) concurrency() int { return max(cmp.Or(l.Concurrency, 1), 1) }
