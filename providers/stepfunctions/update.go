package stepfunctions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/substatehq/substate/internal/jsonx"
)

// applyDefinition makes the state machine arn run definition: when its
// current definition (as DescribeStateMachine returned it; "" to describe
// it now) differs as JSON, UpdateStateMachine replaces it and publishes a
// version whose description names the definition's SHA-256, so every
// definition substate applied stays on record as a version.
func (p *Provider) applyDefinition(ctx context.Context, arn, current string, definition []byte) error {
	if current == "" {
		out, err := p.client.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(arn)})
		if err != nil {
			return wrapAction("describe state machine", "DescribeStateMachine", err)
		}
		current = aws.ToString(out.Definition)
	}
	if jsonx.Equal([]byte(current), definition) {
		return nil
	}
	sum := sha256.Sum256(definition)
	out, err := p.client.UpdateStateMachine(ctx, &sfn.UpdateStateMachineInput{
		StateMachineArn: aws.String(arn), Definition: aws.String(string(definition)), Publish: true,
		VersionDescription: aws.String("substate: definition sha256:" + hex.EncodeToString(sum[:16])),
	})
	if err != nil {
		return wrapAction("update state machine", "UpdateStateMachine", err)
	}
	if p.OnUpdate != nil {
		p.OnUpdate(arn, aws.ToString(out.StateMachineVersionArn))
	}
	return nil
}
