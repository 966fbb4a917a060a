package stepfunctions

import (
	"fmt"
	"slices"
	"time"

	"github.com/substatehq/substate"
)

// largeRegions are the AWS regions where Step Functions' quotas are
// higher.
var largeRegions = []string{"us-east-1", "us-west-2", "eu-west-1"}

// Rules are Step Functions' rules for acting on its executions in region.
// The buckets are its documented per-account API quotas for the region
// (those of most regions when region is not one of the three large ones);
// RedriveExecution, not in the table they are from, gets StopExecution's.
// A fleet job shares them with the worker's poller and every other caller
// of the account, so it can still be throttled (it then backs off). A
// describe reads DescribeExecution and the newest history events, a poll
// (the status published after an action) the same, a restart describes
// the execution for its input and starts a new one. Only a failed,
// timed-out or aborted execution is redriven, within RedriveWindow of its
// stop.
func Rules(region string) substate.ProviderRules {
	apis := map[string]substate.APIBucket{
		"DescribeExecution": {Size: 250, Rate: 10}, "GetExecutionHistory": {Size: 400, Rate: 20},
		"StopExecution": {Size: 500, Rate: 25}, "RedriveExecution": {Size: 500, Rate: 25}, "StartExecution": {Size: 800, Rate: 150},
	}
	if slices.Contains(largeRegions, region) {
		apis = map[string]substate.APIBucket{
			"DescribeExecution": {Size: 300, Rate: 15}, "GetExecutionHistory": {Size: 400, Rate: 20},
			"StopExecution": {Size: 1000, Rate: 200}, "RedriveExecution": {Size: 1000, Rate: 200}, "StartExecution": {Size: 1300, Rate: 300},
		}
	}
	return substate.ProviderRules{
		Concurrency: 16,
		APIs:        apis,
		Costs: map[string][]string{
			substate.OpDescribe:            {"DescribeExecution", "GetExecutionHistory"},
			substate.OpPoll:                {"DescribeExecution", "GetExecutionHistory"},
			string(substate.ActionStop):    {"StopExecution"},
			string(substate.ActionRetry):   {"RedriveExecution"},
			string(substate.ActionRestart): {"DescribeExecution", "StartExecution"},
		},
		RetryRefusal: retryRefusal,
	}
}

// retryRefusal says why Step Functions would not redrive the member's
// execution as the view shows it, or "".
func retryRefusal(m substate.JobMember, now time.Time) string {
	if m.SubState != substate.StateFailed {
		return fmt.Sprintf("Step Functions redrives only failed, timed-out or aborted executions; this one is %s", m.State())
	}
	if !m.Since.IsZero() && now.Sub(m.Since) > RedriveWindow {
		return fmt.Sprintf("Step Functions redrives an execution only within 14 days of its stop; this one stopped on %s", m.Since.UTC().Format(time.DateOnly))
	}
	return ""
}
