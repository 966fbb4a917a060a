package eventbridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ebapi "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions/eventbridge"
	"github.com/substatehq/substate/testkit/awstest"
)

// writes are the operations that change EventBridge resources.
var writes = []string{"CreateConnection", "UpdateConnection", "CreateApiDestination", "UpdateApiDestination", "PutRule", "PutTargets"}

func newSetup(t *testing.T) (*awstest.Server, eventbridge.Setup) {
	t.Helper()
	srv := awstest.New(t)
	return srv, eventbridge.Setup{
		Client:        ebapi.NewFromConfig(srv.Config()),
		Endpoint:      "https://substate.example.com",
		APIKey:        "k-0123456789abcdef",
		DeadLetterARN: "arn:aws:sqs:us-east-1:123456789012:substate-eventbridge-dlq",
		RoleARN:       "arn:aws:iam::123456789012:role/substate-eventbridge",
	}
}

func apply(t *testing.T, s eventbridge.Setup) eventbridge.Result {
	t.Helper()
	res, err := s.Apply(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// writeCalls returns the write calls made since the last ResetCalls.
func writeCalls(srv *awstest.Server) map[string]int {
	out := make(map[string]int)
	for _, op := range writes {
		if n := srv.Calls(op); n > 0 {
			out[op] = n
		}
	}
	return out
}

func TestApplyCreates(t *testing.T) {
	srv, s := newSetup(t)
	res := apply(t, s)
	if got, want := fmt.Sprint(res.Changes), `[connection "substate-ingest" created api destination "substate-ingest" created rule "substate-stepfunctions-status" created target "substate-ingest" created]`; got != want {
		t.Fatalf("changes = %s, want %s", got, want)
	}
	c, ok := srv.Connection("substate-ingest")
	if !ok || c.AuthorizationType != "API_KEY" || c.APIKeyName != "X-Api-Key" || c.APIKeyValue != s.APIKey || c.ARN != res.ConnectionARN {
		t.Fatalf("connection = %+v", c)
	}
	ctx := context.Background()
	d, err := s.Client.DescribeApiDestination(ctx, &ebapi.DescribeApiDestinationInput{Name: aws.String("substate-ingest")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(d.InvocationEndpoint) != "https://substate.example.com/v1/ingest/eventbridge" || d.HttpMethod != types.ApiDestinationHttpMethodPost ||
		aws.ToString(d.ConnectionArn) != res.ConnectionARN || aws.ToInt32(d.InvocationRateLimitPerSecond) != eventbridge.DefaultRateLimitPerSecond {
		t.Fatalf("api destination = %+v", d)
	}
	r, err := s.Client.DescribeRule(ctx, &ebapi.DescribeRuleInput{Name: aws.String("substate-stepfunctions-status")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(r.EventPattern) != eventbridge.EventPattern || r.State != types.RuleStateEnabled || aws.ToString(r.Arn) != res.RuleARN {
		t.Fatalf("rule = %+v", r)
	}
	targets, err := s.Client.ListTargetsByRule(ctx, &ebapi.ListTargetsByRuleInput{Rule: aws.String("substate-stepfunctions-status")})
	if err != nil || len(targets.Targets) != 1 {
		t.Fatalf("targets = %+v, %v", targets, err)
	}
	tg := targets.Targets[0]
	if aws.ToString(tg.Arn) != res.APIDestinationARN || aws.ToString(tg.RoleArn) != s.RoleARN ||
		aws.ToInt32(tg.RetryPolicy.MaximumRetryAttempts) != 185 || aws.ToInt32(tg.RetryPolicy.MaximumEventAgeInSeconds) != 86400 ||
		aws.ToString(tg.DeadLetterConfig.Arn) != s.DeadLetterARN {
		t.Fatalf("target = %+v", tg)
	}
}

func TestApplyTwice(t *testing.T) {
	srv, s := newSetup(t)
	first := apply(t, s)
	srv.ResetCalls()
	second := apply(t, s)
	if second.Changed() || len(writeCalls(srv)) != 0 {
		t.Fatalf("second run changes %v with writes %v, want none", second.Changes, writeCalls(srv))
	}
	if second.ConnectionARN != first.ConnectionARN || second.APIDestinationARN != first.APIDestinationARN || second.RuleARN != first.RuleARN {
		t.Fatalf("ARNs changed: %+v then %+v", first, second)
	}
}

func TestApplyUpdates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*eventbridge.Setup)
		writes string
	}{
		{"Endpoint", func(s *eventbridge.Setup) { s.Endpoint = "https://substate-2.example.com/" }, "map[UpdateApiDestination:1]"},
		{"APIKey", func(s *eventbridge.Setup) { s.APIKey = "k-rotated" }, "map[UpdateConnection:1]"},
		{"RateLimit", func(s *eventbridge.Setup) { s.RateLimitPerSecond = 50 }, "map[UpdateApiDestination:1]"},
		{"RetryPolicy", func(s *eventbridge.Setup) { s.MaximumRetryAttempts = 10 }, "map[PutTargets:1]"},
		{"DeadLetterQueue", func(s *eventbridge.Setup) { s.DeadLetterARN += "-2" }, "map[PutTargets:1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, s := newSetup(t)
			apply(t, s)
			tt.change(&s)
			srv.ResetCalls()
			res := apply(t, s)
			if got := fmt.Sprint(writeCalls(srv)); got != tt.writes {
				t.Fatalf("writes = %s, want %s (changes %v)", got, tt.writes, res.Changes)
			}
			srv.ResetCalls()
			if again := apply(t, s); again.Changed() {
				t.Fatalf("third run changes %v", again.Changes)
			}
		})
	}
	t.Run("EndpointApplied", func(t *testing.T) {
		_, s := newSetup(t)
		apply(t, s)
		s.Endpoint = "https://substate-2.example.com/v1/ingest/eventbridge"
		apply(t, s)
		d, err := s.Client.DescribeApiDestination(context.Background(), &ebapi.DescribeApiDestinationInput{Name: aws.String("substate-ingest")})
		if err != nil || aws.ToString(d.InvocationEndpoint) != s.Endpoint {
			t.Fatalf("endpoint = %s, %v; want %s", aws.ToString(d.InvocationEndpoint), err, s.Endpoint)
		}
	})
	t.Run("DisabledRule", func(t *testing.T) {
		srv, s := newSetup(t)
		apply(t, s)
		_, err := s.Client.PutRule(context.Background(), &ebapi.PutRuleInput{Name: aws.String("substate-stepfunctions-status"),
			EventPattern: aws.String(eventbridge.EventPattern), State: types.RuleStateDisabled})
		if err != nil {
			t.Fatal(err)
		}
		srv.ResetCalls()
		apply(t, s)
		if got := fmt.Sprint(writeCalls(srv)); got != "map[PutRule:1]" {
			t.Fatalf("writes = %s, want the rule enabled again", got)
		}
	})
}

func TestApplyInvalid(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*eventbridge.Setup)
	}{
		{"NoClient", func(s *eventbridge.Setup) { s.Client = nil }},
		{"BadName", func(s *eventbridge.Setup) { s.Name = "sub state" }},
		{"LongName", func(s *eventbridge.Setup) { s.Name = strings.Repeat("n", 44) }},
		{"HTTPEndpoint", func(s *eventbridge.Setup) { s.Endpoint = "http://substate.example.com" }},
		{"NoEndpoint", func(s *eventbridge.Setup) { s.Endpoint = "" }},
		{"NoAPIKey", func(s *eventbridge.Setup) { s.APIKey = "" }},
		{"NoRole", func(s *eventbridge.Setup) { s.RoleARN = "" }},
		{"NoDeadLetterQueue", func(s *eventbridge.Setup) { s.DeadLetterARN = "" }},
		{"TooManyRetries", func(s *eventbridge.Setup) { s.MaximumRetryAttempts = 186 }},
		{"EventAgeTooLong", func(s *eventbridge.Setup) { s.MaximumEventAgeSeconds = 86401 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, s := newSetup(t)
			tt.change(&s)
			_, err := s.Apply(context.Background())
			if substate.ErrorCode(err) != substate.EINVALID || srv.TotalCalls() != 0 {
				t.Fatalf("err = %v after %d calls, want EINVALID before any call", err, srv.TotalCalls())
			}
		})
	}
}

func TestIngestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h.example.com":                             "https://h.example.com/v1/ingest/eventbridge",
		"https://h.example.com/":                            "https://h.example.com/v1/ingest/eventbridge",
		"https://h.example.com/base":                        "https://h.example.com/base/v1/ingest/eventbridge",
		"https://h.example.com/v1/ingest/eventbridge":       "https://h.example.com/v1/ingest/eventbridge",
		"https://h.example.com:8443/v1/ingest/eventbridge/": "https://h.example.com:8443/v1/ingest/eventbridge",
	} {
		if got := eventbridge.IngestURL(in); got != want {
			t.Errorf("IngestURL(%q) = %q, want %q", in, got, want)
		}
	}
}
