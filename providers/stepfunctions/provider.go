// Package stepfunctions drives AWS Step Functions as a substate workflow
// provider: it creates state machines from Amazon States Language
// definitions, starts executions idempotently under caller-given names,
// stops them, and reads an execution's status as raw provider evidence (a
// DescribeExecution response with its recent history) for the normalizer
// to map.
//
// The provider never maps statuses itself: Describe and Poll return a
// substate.RawEvent of kind stepfunctions.poll whose body is the payload
// the mapping package decodes, so the reconciler can publish it on
// SUBSTATE_RAW as it is.
//
// Errors are *substate.Error values whose message names the operation
// ("stepfunctions: describe execution") and whose cause is the AWS SDK
// error; see ErrorCode for the code of each AWS error.
package stepfunctions

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/timex"
)

// Defaults of a new Provider.
const (
	DefaultMaxHistoryEvents = 100
	DefaultHistoryPageSize  = 20
	DefaultTenantField      = "tenantId"
)

// Provider is the AWS Step Functions workflow provider. Set its exported
// fields after New and before first use. It is safe for concurrent use.
type Provider struct {
	// Region is the region of the state machines; New takes it from the
	// AWS configuration. It decides the ARN partition.
	Region string
	// AccountID is the account of the state machines. When it is set,
	// state machine ARNs are built from it and the name; when it is empty,
	// the provider finds a state machine by name with ListStateMachines and
	// learns the account from the first ARN it sees (a listed or created
	// state machine), so no STS call is needed.
	AccountID string
	// RoleARN is the IAM role Step Functions assumes to run the state
	// machines EnsureWorkflow creates. Only creating needs it.
	RoleARN string
	// MaxHistoryEvents bounds how many of the history events a poll read,
	// newest first, its raw event carries verbatim; the older ones are in
	// its summary (PollHistory.Prior).
	MaxHistoryEvents int
	// HistoryPageSize is the maxResults of each GetExecutionHistory call
	// of a poll that reads on from an earlier one, at most 1000; the first
	// read of an execution uses pages of 1000.
	HistoryPageSize int
	// TenantField is the member of the execution input that Start writes a
	// request's tenant id to when the input does not have it, so the
	// default tenant rule ($.tenantId) resolves the tenant. Empty disables
	// it.
	TenantField string
	// Now returns the current time, recorded as the poll time.
	Now func() time.Time
	// OnUpdate, when set, is told about each state machine EnsureWorkflow
	// updated to a changed definition, with the version it published.
	OnUpdate func(machineARN, versionARN string)
	// Backoff is the wait of an API Step Functions throttles, after each
	// throttled call in a row; Now times it.
	Backoff timex.Backoff
	// OnBackoff, when set, is told each time an API is throttled, with the
	// backoff it now waits, and with 0 when it answers again.
	OnBackoff func(operation string, backoff time.Duration)
	// OnBehind, when set, is told how many executions were polled without
	// their history (GetExecutionHistory backing off) and not read since,
	// each time it changes.
	OnBehind func(executions int)
	// Logger receives the provider's logs (throttling, falling behind,
	// catching up); nil discards them.
	Logger *slog.Logger

	client *sfn.Client

	mu          sync.Mutex
	account     string // AccountID, or the account learned from an ARN
	cursors     map[string]*cursor
	pruned      time.Time
	throttles   map[string]*throttle // by operation
	behind      map[string]time.Time // executions polled without history, when last
	behindSince time.Time            // when the first of them fell behind
	behindTotal int                  // how many fell behind since then
}

var _ engine.Provider = (*Provider)(nil)

// New returns a provider that calls Step Functions with a client built from
// cfg (see LoadConfig) and the optional client options.
func New(cfg aws.Config, optFns ...func(*sfn.Options)) *Provider {
	p := &Provider{
		Region:           cfg.Region,
		MaxHistoryEvents: DefaultMaxHistoryEvents,
		HistoryPageSize:  DefaultHistoryPageSize,
		TenantField:      DefaultTenantField,
		Now:              func() time.Time { return time.Now().UTC() },
		Backoff:          timex.Backoff{Base: DefaultThrottleBase, Max: DefaultThrottleMax},
		throttles:        map[string]*throttle{},
		behind:           map[string]time.Time{},
	}
	p.client = sfn.NewFromConfig(cfg, append([]func(*sfn.Options){p.observeThrottling()}, optFns...)...)
	return p
}

// LoadConfig loads the AWS configuration the standard way (environment,
// shared files, instance roles), so AWS_REGION, the credential chain,
// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_SFN apply. A non-empty region
// overrides the configured one.
func LoadConfig(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, substate.WrapError(substate.EINVALID, err, "stepfunctions: load aws config")
	}
	return cfg, nil
}

// Name returns substate.ProviderStepFunctions.
func (p *Provider) Name() substate.Provider { return substate.ProviderStepFunctions }

// Client returns the Step Functions client the provider uses.
func (p *Provider) Client() *sfn.Client { return p.client }

// EnsureWorkflow creates a STANDARD state machine named w.Name with the ASL
// definition w.Definition unless one with that name exists, and returns its
// ARN. An existing state machine whose definition differs (as JSON) is
// updated to it and a new version is published (UpdateStateMachine); one
// with the same definition is left as it is. The definition is checked
// (JSON, StartAt naming one of States) before any call.
func (p *Provider) EnsureWorkflow(ctx context.Context, w engine.Workflow) (string, error) {
	if err := checkName("state machine", w.Name); err != nil {
		return "", err
	}
	if err := CheckDefinition(w.Definition); err != nil {
		return "", err
	}
	arn, current, found, err := p.lookupStateMachine(ctx, w.Name)
	if err != nil {
		return "", err
	}
	if found {
		return arn, p.applyDefinition(ctx, arn, current, w.Definition)
	}
	if p.RoleARN == "" {
		return "", substate.Errorf(substate.EINVALID, "stepfunctions: create state machine %q: no execution role arn configured", w.Name)
	}
	out, err := p.client.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
		Name:       aws.String(w.Name),
		Definition: aws.String(string(w.Definition)),
		RoleArn:    aws.String(p.RoleARN),
		Type:       types.StateMachineTypeStandard,
	})
	if err != nil {
		return "", wrap("create state machine", err)
	}
	arn = aws.ToString(out.StateMachineArn)
	p.learnAccount(arn)
	return arn, nil
}

// DeleteWorkflow deletes the state machine ref (an ARN or a name). Deleting
// one that does not exist succeeds, as in Step Functions.
func (p *Provider) DeleteWorkflow(ctx context.Context, ref string) error {
	arn, found, err := p.stateMachineRef(ctx, ref)
	if err != nil || !found {
		return err
	}
	_, err = p.client.DeleteStateMachine(ctx, &sfn.DeleteStateMachineInput{StateMachineArn: aws.String(arn)})
	return wrap("delete state machine", err)
}

// stateMachineRef resolves a workflow reference: an ARN is used as it is,
// a name is found with findStateMachine.
func (p *Provider) stateMachineRef(ctx context.Context, ref string) (arn string, found bool, err error) {
	if strings.HasPrefix(ref, "arn:") {
		return ref, true, nil
	}
	if err := checkName("state machine", ref); err != nil {
		return "", false, err
	}
	return p.findStateMachine(ctx, ref)
}

// findStateMachine returns the ARN of the state machine named name: with a
// known account by DescribeStateMachine on the built ARN, else by listing.
func (p *Provider) findStateMachine(ctx context.Context, name string) (string, bool, error) {
	arn, _, found, err := p.lookupStateMachine(ctx, name)
	return arn, found, err
}

// lookupStateMachine is findStateMachine that also returns the definition
// when DescribeStateMachine told it ("" after a listing).
func (p *Provider) lookupStateMachine(ctx context.Context, name string) (arn, definition string, found bool, err error) {
	account := p.accountID()
	if account == "" {
		arn, found, err = p.listStateMachine(ctx, name)
		return arn, "", found, err
	}
	arn = StateMachineARN(p.Region, account, name)
	out, err := p.client.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(arn)})
	if err != nil {
		if ErrorCode(err) == substate.ENOTFOUND {
			return "", "", false, nil
		}
		return "", "", false, wrap("describe state machine", err)
	}
	if out.Status == types.StateMachineStatusDeleting {
		return "", "", false, substate.Errorf(substate.ECONFLICT, "stepfunctions: state machine %q is being deleted", name)
	}
	return arn, aws.ToString(out.Definition), true, nil
}

// listStateMachine pages through ListStateMachines looking for name.
func (p *Provider) listStateMachine(ctx context.Context, name string) (string, bool, error) {
	pages := sfn.NewListStateMachinesPaginator(p.client, &sfn.ListStateMachinesInput{MaxResults: 1000})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return "", false, wrap("list state machines", err)
		}
		for _, m := range page.StateMachines {
			p.learnAccount(aws.ToString(m.StateMachineArn))
			if aws.ToString(m.Name) == name {
				return aws.ToString(m.StateMachineArn), true, nil
			}
		}
	}
	return "", false, nil
}

// accountID returns AccountID, or the account learned from an ARN.
func (p *Provider) accountID() string {
	if p.AccountID != "" {
		return p.AccountID
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.account
}

func (p *Provider) learnAccount(arn string) {
	if a := accountOf(arn); a != "" {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.account == "" {
			p.account = a
		}
	}
}
