package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	ebapi "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/providers/stepfunctions/eventbridge"
)

// DeployCmd is "substate deploy": it sets up the cloud resources that feed
// a worker.
type DeployCmd struct {
	EventBridge DeployEventBridgeCmd `cmd:"" name:"eventbridge" help:"Create or update the EventBridge connection, API destination, rule and target that send Step Functions status changes to the ingress."`
}

// DeployEventBridgeCmd is "substate deploy eventbridge". It talks to AWS
// with the SDK's default configuration chain: AWS_REGION, AWS_PROFILE, the
// shared config and credentials files, instance and container roles, and
// AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_EVENTBRIDGE for another endpoint.
type DeployEventBridgeCmd struct {
	Endpoint      string `required:"" help:"Public HTTPS base URL of the worker's ingress; /v1/ingest/eventbridge is appended." placeholder:"URL"`
	APIKeySecret  string `name:"api-key-secret" default:"env:SUBSTATE_INGEST_API_KEY" help:"Where to read the ingest API key (the worker's --ingest-api-key): env:NAME or file:PATH. The key itself is refused, so that it stays out of shell history and process lists."`
	Name          string `default:"substate" help:"Prefix of the resource names: <name>-ingest, <name>-stepfunctions-status."`
	DeadLetterARN string `name:"dead-letter-arn" required:"" help:"ARN of the SQS queue that keeps the events EventBridge could not deliver." placeholder:"ARN"`
	RoleARN       string `name:"role-arn" required:"" help:"ARN of the IAM role EventBridge assumes to call the API destination (events:InvokeApiDestination)." placeholder:"ARN"`
	RateLimit     int32  `default:"300" help:"Largest number of deliveries per second to the ingress."`
	Region        string `help:"AWS region (default: AWS_REGION or the shared config)."`
	OutputFlags   `embed:""`
}

// Run applies the EventBridge setup and prints what it created, updated or
// left unchanged; on an error it prints what it did before failing.
func (c *DeployEventBridgeCmd) Run(ctx context.Context, m *Main) error {
	key, err := readSecret(c.APIKeySecret)
	if err != nil {
		return err
	}
	client, err := c.client(ctx)
	if err != nil {
		return err
	}
	res, err := eventbridge.Setup{
		Client: client, Name: c.Name, Endpoint: c.Endpoint, APIKey: key,
		RateLimitPerSecond: c.RateLimit, DeadLetterARN: c.DeadLetterARN, RoleARN: c.RoleARN,
	}.Apply(ctx)
	if len(res.Changes) > 0 || err == nil {
		if perr := c.print(m.Stdout, res); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// client returns an EventBridge client from the SDK's default chain.
func (c *DeployEventBridgeCmd) client(ctx context.Context) (*ebapi.Client, error) {
	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, substate.Errorf(substate.EINVALID, "no AWS region: set --region or AWS_REGION")
	}
	return ebapi.NewFromConfig(cfg), nil
}

// readSecret resolves a secret reference: env:NAME reads an environment
// variable, file:PATH a file, both with surrounding white space trimmed.
// Its errors never repeat the reference, which may be a pasted secret.
func readSecret(ref string) (string, error) {
	kind, arg, _ := strings.Cut(ref, ":")
	var v string
	switch kind {
	case "env":
		v = strings.TrimSpace(os.Getenv(arg))
		if v == "" {
			return "", substate.Errorf(substate.EINVALID, "api key secret: environment variable %s is unset or empty", arg)
		}
	case "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", fmt.Errorf("api key secret: %w", err)
		}
		if v = strings.TrimSpace(string(b)); v == "" {
			return "", substate.Errorf(substate.EINVALID, "api key secret: file %s is empty", arg)
		}
	default:
		return "", substate.Errorf(substate.EINVALID, "--api-key-secret must be env:NAME or file:PATH (the key itself is not accepted)")
	}
	return v, nil
}

// deployResult is the JSON form of an eventbridge.Result.
type deployResult struct {
	ConnectionARN     string         `json:"connectionArn"`
	APIDestinationARN string         `json:"apiDestinationArn"`
	RuleARN           string         `json:"ruleArn"`
	Changed           bool           `json:"changed"`
	Changes           []deployChange `json:"changes"`
}

type deployChange struct {
	Resource string `json:"resource"`
	Name     string `json:"name"`
	Action   string `json:"action"`
}

func (c *DeployEventBridgeCmd) print(w io.Writer, res eventbridge.Result) error {
	arns := map[string]string{"connection": res.ConnectionARN, "api destination": res.APIDestinationARN, "rule": res.RuleARN}
	out := deployResult{ConnectionARN: res.ConnectionARN, APIDestinationARN: res.APIDestinationARN, RuleARN: res.RuleARN,
		Changed: res.Changed(), Changes: []deployChange{}}
	for _, ch := range res.Changes {
		out.Changes = append(out.Changes, deployChange{ch.Resource, ch.Name, ch.Action})
	}
	return c.Printer(w).PrintTable(out, func(bool) termtext.Table {
		t := termtext.Table{Header: []string{"RESOURCE", "NAME", "ACTION", "ARN"}}
		for _, ch := range res.Changes {
			t.Rows = append(t.Rows, []string{ch.Resource, termtext.Text(ch.Name), ch.Action, termtext.Dash(termtext.Text(arns[ch.Resource]))})
		}
		return t
	})
}
