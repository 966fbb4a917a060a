package stepfunctions

import (
	"context"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go"

	"github.com/substatehq/substate"
)

// Feature is something substate does with Step Functions.
type Feature string

// The features, and the IAM actions (states:<Action>) each needs.
const (
	// FeatureReconcile polls running executions (the reconciler).
	FeatureReconcile Feature = "reconcile"
	// FeatureOperate describes, stops, redrives and restarts executions
	// (substate executions).
	FeatureOperate Feature = "operate"
)

// FeatureActions are the Step Functions actions each feature of the worker
// calls. (substate workflow start, a CLI command, is not checked ahead: a
// missing permission fails it with the action named; docs/executions.md
// lists its actions.)
var FeatureActions = map[Feature][]string{
	FeatureReconcile: {"DescribeExecution", "GetExecutionHistory"},
	FeatureOperate:   {"DescribeExecution", "GetExecutionHistory", "StopExecution", "RedriveExecution", "StartExecution"},
}

// probeName names the state machine and execution the permission probes
// ask about; neither exists, so a probe that IAM lets through changes
// nothing and fails with a "does not exist" error.
const probeName = "substate-permission-probe"

// probes make one harmless call of an action, on a state machine or
// execution that does not exist.
var probes = map[string]func(ctx context.Context, c *sfn.Client, machine, execution string) error{
	"DescribeExecution": func(ctx context.Context, c *sfn.Client, _, x string) error {
		_, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(x)})
		return err
	},
	"GetExecutionHistory": func(ctx context.Context, c *sfn.Client, _, x string) error {
		_, err := c.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(x), MaxResults: 1})
		return err
	},
	"StopExecution": func(ctx context.Context, c *sfn.Client, _, x string) error {
		_, err := c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(x)})
		return err
	},
	"RedriveExecution": func(ctx context.Context, c *sfn.Client, _, x string) error {
		_, err := c.RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(x)})
		return err
	},
	"StartExecution": func(ctx context.Context, c *sfn.Client, m, _ string) error {
		_, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(m), Name: aws.String(probeName)})
		return err
	},
}

// CheckPermissions makes one harmless call of every action the features
// need (see probes) and returns, in FeatureActions order, the actions
// Step Functions refused with AccessDeniedException. Any other answer
// means the call got past IAM. The probes ask about resources of the
// provider's account, learned from ListStateMachines when AccountID is not
// set; when it cannot be learned the check is EUNAVAILABLE, since a probe
// on another account would say nothing about the policy. A probe that
// could not be sent is an error too.
func (p *Provider) CheckPermissions(ctx context.Context, features ...Feature) ([]string, error) {
	var actions []string
	for _, f := range features {
		for _, a := range FeatureActions[f] {
			if !slices.Contains(actions, a) {
				actions = append(actions, a)
			}
		}
	}
	var missing []string
	if p.accountID() == "" { // learn it from a listed ARN
		if _, _, err := p.listStateMachine(ctx, probeName); denied(err) {
			missing = append(missing, "ListStateMachines")
		} else if err != nil {
			return nil, err
		}
	}
	account := p.accountID()
	if account == "" {
		return missing, substate.Errorf(substate.EUNAVAILABLE,
			"stepfunctions: check permissions: the account is not known (no state machine listed): set the account to check")
	}
	machine := StateMachineARN(p.Region, account, probeName)
	execution, _ := ExecutionARN(machine, probeName)
	for _, a := range actions {
		if slices.Contains(missing, a) {
			continue
		}
		err := probes[a](ctx, p.client, machine, execution)
		switch {
		case denied(err):
			missing = append(missing, a)
		case err != nil && !answered(err):
			return missing, wrap("check permissions", err)
		}
	}
	return missing, nil
}

// denied reports an AccessDeniedException.
func denied(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException"
}

// answered reports an error answer from Step Functions itself (the call
// was let through IAM), not a failure to reach it.
func answered(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && ErrorCode(err) != substate.EUNAVAILABLE
}
