package eventbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	ebapi "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/jsonx"
)

const (
	destinationDescription = "substate ingress for Step Functions status changes"
	ruleDescription        = "Step Functions execution status changes to substate"
)

func notFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

// record appends what was done to a resource to the result.
func (r *Result) record(resource, name, action string) {
	r.Changes = append(r.Changes, Change{Resource: resource, Name: name, Action: action})
}

// ensureConnection creates the API-key connection, or updates it when its
// header, authorization type or key fingerprint differ.
func (s *Setup) ensureConnection(ctx context.Context, res *Result) (string, error) {
	name, desc := s.connectionName(), s.connectionDescription()
	got, err := s.Client.DescribeConnection(ctx, &ebapi.DescribeConnectionInput{Name: aws.String(name)})
	if notFound(err) {
		out, err := s.Client.CreateConnection(ctx, &ebapi.CreateConnectionInput{
			Name: aws.String(name), Description: aws.String(desc), AuthorizationType: types.ConnectionAuthorizationTypeApiKey,
			AuthParameters: &types.CreateConnectionAuthRequestParameters{ApiKeyAuthParameters: &types.CreateConnectionApiKeyAuthRequestParameters{
				ApiKeyName: aws.String(substate.HeaderAPIKey), ApiKeyValue: aws.String(s.APIKey)}},
		})
		if err != nil {
			return "", fmt.Errorf("eventbridge setup: create connection %q: %w", name, err)
		}
		res.record("connection", name, "created")
		return aws.ToString(out.ConnectionArn), nil
	} else if err != nil {
		return "", fmt.Errorf("eventbridge setup: describe connection %q: %w", name, err)
	}
	var header string
	if p := got.AuthParameters; p != nil && p.ApiKeyAuthParameters != nil {
		header = aws.ToString(p.ApiKeyAuthParameters.ApiKeyName)
	}
	if got.AuthorizationType == types.ConnectionAuthorizationTypeApiKey && header == substate.HeaderAPIKey && aws.ToString(got.Description) == desc {
		res.record("connection", name, "unchanged")
		return aws.ToString(got.ConnectionArn), nil
	}
	out, err := s.Client.UpdateConnection(ctx, &ebapi.UpdateConnectionInput{
		Name: aws.String(name), Description: aws.String(desc), AuthorizationType: types.ConnectionAuthorizationTypeApiKey,
		AuthParameters: &types.UpdateConnectionAuthRequestParameters{ApiKeyAuthParameters: &types.UpdateConnectionApiKeyAuthRequestParameters{
			ApiKeyName: aws.String(substate.HeaderAPIKey), ApiKeyValue: aws.String(s.APIKey)}},
	})
	if err != nil {
		return "", fmt.Errorf("eventbridge setup: update connection %q: %w", name, err)
	}
	res.record("connection", name, "updated")
	return aws.ToString(out.ConnectionArn), nil
}

// ensureAPIDestination creates the API destination, or updates it when its
// connection, endpoint, method, rate limit or description differ.
func (s *Setup) ensureAPIDestination(ctx context.Context, res *Result, connectionARN string) (string, error) {
	name := s.destinationName()
	got, err := s.Client.DescribeApiDestination(ctx, &ebapi.DescribeApiDestinationInput{Name: aws.String(name)})
	if notFound(err) {
		out, err := s.Client.CreateApiDestination(ctx, &ebapi.CreateApiDestinationInput{
			Name: aws.String(name), Description: aws.String(destinationDescription), ConnectionArn: aws.String(connectionARN),
			InvocationEndpoint: aws.String(s.Endpoint), HttpMethod: types.ApiDestinationHttpMethodPost,
			InvocationRateLimitPerSecond: aws.Int32(s.RateLimitPerSecond),
		})
		if err != nil {
			return "", fmt.Errorf("eventbridge setup: create api destination %q: %w", name, err)
		}
		res.record("api destination", name, "created")
		return aws.ToString(out.ApiDestinationArn), nil
	} else if err != nil {
		return "", fmt.Errorf("eventbridge setup: describe api destination %q: %w", name, err)
	}
	if aws.ToString(got.ConnectionArn) == connectionARN && aws.ToString(got.InvocationEndpoint) == s.Endpoint &&
		got.HttpMethod == types.ApiDestinationHttpMethodPost && aws.ToInt32(got.InvocationRateLimitPerSecond) == s.RateLimitPerSecond &&
		aws.ToString(got.Description) == destinationDescription {
		res.record("api destination", name, "unchanged")
		return aws.ToString(got.ApiDestinationArn), nil
	}
	out, err := s.Client.UpdateApiDestination(ctx, &ebapi.UpdateApiDestinationInput{
		Name: aws.String(name), Description: aws.String(destinationDescription), ConnectionArn: aws.String(connectionARN),
		InvocationEndpoint: aws.String(s.Endpoint), HttpMethod: types.ApiDestinationHttpMethodPost,
		InvocationRateLimitPerSecond: aws.Int32(s.RateLimitPerSecond),
	})
	if err != nil {
		return "", fmt.Errorf("eventbridge setup: update api destination %q: %w", name, err)
	}
	res.record("api destination", name, "updated")
	return aws.ToString(out.ApiDestinationArn), nil
}

// ensureRule puts the rule unless it exists enabled with the same pattern
// and description. PutRule creates and updates alike.
func (s *Setup) ensureRule(ctx context.Context, res *Result) (string, error) {
	name := s.ruleName()
	got, err := s.Client.DescribeRule(ctx, &ebapi.DescribeRuleInput{Name: aws.String(name), EventBusName: aws.String(s.EventBusName)})
	action := "created"
	switch {
	case notFound(err):
	case err != nil:
		return "", fmt.Errorf("eventbridge setup: describe rule %q: %w", name, err)
	case got.State == types.RuleStateEnabled && jsonx.Equal([]byte(aws.ToString(got.EventPattern)), []byte(EventPattern)) &&
		aws.ToString(got.Description) == ruleDescription:
		res.record("rule", name, "unchanged")
		return aws.ToString(got.Arn), nil
	default:
		action = "updated"
	}
	out, err := s.Client.PutRule(ctx, &ebapi.PutRuleInput{
		Name: aws.String(name), EventBusName: aws.String(s.EventBusName), EventPattern: aws.String(EventPattern),
		State: types.RuleStateEnabled, Description: aws.String(ruleDescription),
	})
	if err != nil {
		return "", fmt.Errorf("eventbridge setup: put rule %q: %w", name, err)
	}
	res.record("rule", name, action)
	return aws.ToString(out.RuleArn), nil
}

// ensureTarget puts the rule's target unless an equal one is in place.
func (s *Setup) ensureTarget(ctx context.Context, res *Result, destinationARN string) error {
	rule := s.ruleName()
	want := types.Target{
		Id: aws.String(TargetID), Arn: aws.String(destinationARN), RoleArn: aws.String(s.RoleARN),
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(s.MaximumRetryAttempts),
			MaximumEventAgeInSeconds: aws.Int32(s.MaximumEventAgeSeconds),
		},
		DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(s.DeadLetterARN)},
	}
	got, err := s.findTarget(ctx, rule)
	if err != nil {
		return err
	}
	action := "created"
	if got != nil {
		if sameTarget(got, &want) {
			res.record("target", TargetID, "unchanged")
			return nil
		}
		action = "updated"
	}
	out, err := s.Client.PutTargets(ctx, &ebapi.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(s.EventBusName), Targets: []types.Target{want}})
	if err != nil {
		return fmt.Errorf("eventbridge setup: put target of rule %q: %w", rule, err)
	}
	if out.FailedEntryCount > 0 {
		f := out.FailedEntries[0]
		return fmt.Errorf("eventbridge setup: put target of rule %q: %s: %s", rule, aws.ToString(f.ErrorCode), aws.ToString(f.ErrorMessage))
	}
	res.record("target", TargetID, action)
	return nil
}

// findTarget returns the rule's target with TargetID, or nil.
func (s *Setup) findTarget(ctx context.Context, rule string) (*types.Target, error) {
	in := &ebapi.ListTargetsByRuleInput{Rule: aws.String(rule), EventBusName: aws.String(s.EventBusName)}
	for {
		page, err := s.Client.ListTargetsByRule(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("eventbridge setup: list targets of rule %q: %w", rule, err)
		}
		for i := range page.Targets {
			if aws.ToString(page.Targets[i].Id) == TargetID {
				return &page.Targets[i], nil
			}
		}
		if page.NextToken == nil {
			return nil, nil
		}
		in.NextToken = page.NextToken
	}
}

// sameTarget compares the members Apply sets; a target that also changes
// the request (input, input transformer, HTTP parameters) differs.
func sameTarget(got, want *types.Target) bool {
	var gr, wr types.RetryPolicy
	if got.RetryPolicy != nil {
		gr = *got.RetryPolicy
	}
	wr = *want.RetryPolicy
	var dlq string
	if got.DeadLetterConfig != nil {
		dlq = aws.ToString(got.DeadLetterConfig.Arn)
	}
	return aws.ToString(got.Arn) == aws.ToString(want.Arn) &&
		aws.ToString(got.RoleArn) == aws.ToString(want.RoleArn) &&
		aws.ToInt32(gr.MaximumRetryAttempts) == aws.ToInt32(wr.MaximumRetryAttempts) &&
		aws.ToInt32(gr.MaximumEventAgeInSeconds) == aws.ToInt32(wr.MaximumEventAgeInSeconds) &&
		dlq == aws.ToString(want.DeadLetterConfig.Arn) &&
		got.Input == nil && got.InputPath == nil && got.InputTransformer == nil && got.HttpParameters == nil
}
