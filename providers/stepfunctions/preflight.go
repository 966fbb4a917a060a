package stepfunctions

import (
	"context"
	"slices"
	"strings"

	"github.com/substatehq/substate"
)

// actionPermissions are the IAM actions each action of a fleet job needs
// of Step Functions: the describe before it, then the action itself.
var actionPermissions = map[substate.ExecutionAction][]string{
	substate.ActionRetry:   {"DescribeExecution", "GetExecutionHistory", "RedriveExecution"},
	substate.ActionStop:    {"DescribeExecution", "GetExecutionHistory", "StopExecution"},
	substate.ActionRestart: {"DescribeExecution", "GetExecutionHistory", "StartExecution"},
}

// ActionPreflight checks, for a fleet job's dry run, the IAM permissions
// the action needs, with the probes of CheckPermissions: it says which
// the credentials lack, or "" when they lack none.
func (p *Provider) ActionPreflight(ctx context.Context, action substate.ExecutionAction) (string, error) {
	missing, err := p.CheckPermissions(ctx, FeatureOperate)
	if err != nil {
		return "", err
	}
	var lack []string
	for _, a := range actionPermissions[action] {
		if slices.Contains(missing, a) {
			lack = append(lack, "states:"+a)
		}
	}
	if len(lack) == 0 {
		return "", nil
	}
	return "the AWS credentials lack the IAM permission " + strings.Join(lack, ", "), nil
}
