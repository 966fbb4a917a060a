package stepfunctions

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/jsonx"
)

// Step Functions limits on StopExecution's error and cause.
const (
	maxStopError = 256
	maxStopCause = 32768
)

// Start starts an execution of the state machine req.Workflow (an ARN or a
// name) under the name req.Name (GeneratedName when empty). The name is the idempotency key: when an
// execution with that name exists, running or closed, and its input equals
// the request's (as JSON values), it is returned with Existing set; another
// input is an ECONFLICT error. Start describes the execution first, so a
// new start costs two calls; two concurrent starts of the same new name
// may both report Existing false.
//
// The input must be a JSON object ("{}" when empty). When TenantField is
// set and the input lacks that member, Start adds it with req.TenantID; an
// input naming another tenant is EINVALID.
func (p *Provider) Start(ctx context.Context, req engine.StartRequest) (engine.Execution, error) {
	if req.Name == "" {
		req.Name = GeneratedName(p.Now())
	}
	if err := checkName("execution", req.Name); err != nil {
		return engine.Execution{}, err
	}
	input, err := p.startInput(req)
	if err != nil {
		return engine.Execution{}, err
	}
	machine, found, err := p.stateMachineRef(ctx, req.Workflow)
	if err != nil {
		return engine.Execution{}, err
	} else if !found {
		return engine.Execution{}, substate.Errorf(substate.ENOTFOUND, "stepfunctions: start execution: state machine %q does not exist", req.Workflow)
	}
	arn, err := ExecutionARN(machine, req.Name)
	if err != nil {
		return engine.Execution{}, err
	}
	if x, ok, err := p.existing(ctx, arn, input); ok || err != nil {
		return x, err
	}
	out, err := p.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(machine), Name: aws.String(req.Name), Input: aws.String(string(input)),
	})
	if ErrorCode(err) == substate.EEXISTS {
		// Started by someone else since we looked, or closed: compare again.
		if x, ok, xerr := p.existing(ctx, arn, input); ok || xerr != nil {
			return x, xerr
		}
	}
	if err != nil {
		return engine.Execution{}, wrap("start execution", err)
	}
	return engine.Execution{ID: aws.ToString(out.ExecutionArn), Name: req.Name, Workflow: machine, StartedAt: aws.ToTime(out.StartDate)}, nil
}

// existing describes the execution arn: not found is (ok false, nil); found
// with the same input is the execution with Existing set; found with
// another input is an ECONFLICT error.
func (p *Provider) existing(ctx context.Context, arn string, input []byte) (engine.Execution, bool, error) {
	out, err := p.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil {
		if ErrorCode(err) == substate.ENOTFOUND {
			return engine.Execution{}, false, nil
		}
		return engine.Execution{}, false, wrap("describe execution", err)
	}
	// An input Step Functions does not return (excluded from the
	// response) cannot be compared; the name decides alone.
	if out.Input != nil && !jsonx.Equal([]byte(*out.Input), input) {
		return engine.Execution{}, false, substate.Errorf(substate.ECONFLICT,
			"stepfunctions: start execution: execution %q exists with a different input", aws.ToString(out.Name))
	}
	return engine.Execution{
		ID: arn, Name: aws.ToString(out.Name), Workflow: aws.ToString(out.StateMachineArn),
		StartedAt: aws.ToTime(out.StartDate), Existing: true,
	}, true, nil
}

// startInput returns the execution input: a JSON object, with the tenant
// member added when configured and missing.
func (p *Provider) startInput(req engine.StartRequest) ([]byte, error) {
	raw := bytes.TrimSpace(req.Input)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, substate.WrapError(substate.EINVALID, err, "stepfunctions: execution input must be a JSON object")
	}
	if p.TenantField == "" || req.TenantID == "" {
		return raw, nil
	}
	if v, ok := obj[p.TenantField]; ok {
		var got string
		if json.Unmarshal(v, &got) != nil || got != req.TenantID {
			return nil, substate.Errorf(substate.EINVALID, "stepfunctions: execution input %s is %s, not tenant %q", p.TenantField, v, req.TenantID)
		}
		return raw, nil
	}
	obj[p.TenantField], _ = json.Marshal(req.TenantID)
	return json.Marshal(obj)
}

// Stop stops the execution executionID (its ARN) with an error and cause,
// cut to Step Functions' limits. Stopping a closed execution changes
// nothing; an unknown one is ENOTFOUND.
func (p *Provider) Stop(ctx context.Context, executionID, errorType, cause string) error {
	_, err := p.client.StopExecution(ctx, &sfn.StopExecutionInput{
		ExecutionArn: aws.String(executionID),
		Error:        aws.String(substate.Truncate(errorType, maxStopError)),
		Cause:        aws.String(substate.Truncate(cause, maxStopCause)),
	})
	return wrap("stop execution", err)
}
