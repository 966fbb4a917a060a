// Package eventbridge wires AWS Step Functions status changes to substate's
// HTTP ingress through Amazon EventBridge, for `substate deploy
// eventbridge`: a Connection holding the ingest API key, an API destination
// that POSTs to <endpoint>/v1/ingest/eventbridge, a rule matching "Step
// Functions Execution Status Change" events, and the rule's target with a
// retry policy and a dead-letter queue.
//
// Setup.Apply is idempotent: it describes each resource, creates what is
// missing, updates what differs and leaves equal resources untouched, so a
// second run with the same settings makes no change. The CloudFormation
// template deploy/cloudformation/eventbridge.yaml builds the same resources
// (and the queue and role this package expects to exist).
package eventbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"

	ebapi "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/substatehq/substate"
)

// What the ingress expects and what the rule matches.
const (
	// IngestPath is the ingress path of EventBridge events.
	IngestPath = "/v1/ingest/eventbridge"
	// EventPattern matches every Step Functions execution status change
	// (Step Functions sends them to the default event bus).
	EventPattern = `{"source":["aws.states"],"detail-type":["Step Functions Execution Status Change"]}`
	// TargetID is the id of the rule's target.
	TargetID = "substate-ingest"
)

// Defaults of the optional Setup fields.
const (
	DefaultName                   = "substate"
	DefaultEventBusName           = "default"
	DefaultRateLimitPerSecond     = 300
	DefaultMaximumRetryAttempts   = 185   // EventBridge's largest value
	DefaultMaximumEventAgeSeconds = 86400 // 24 h, EventBridge's largest value
)

// Setup describes the EventBridge resources to create or update.
type Setup struct {
	// Client is the EventBridge client of the account and region whose
	// Step Functions executions substate should hear about.
	Client *ebapi.Client
	// Name prefixes the resource names: <Name>-ingest for the connection
	// and the API destination, <Name>-stepfunctions-status for the rule.
	Name string
	// Endpoint is the worker's public HTTPS base URL; IngestPath is
	// appended unless it already ends with it.
	Endpoint string
	// APIKey is the ingest API key (the secret value). EventBridge stores
	// it in Secrets Manager and never returns it; the connection's
	// description keeps a short SHA-256 fingerprint of it, so a changed key
	// is detected without reading the secret.
	APIKey string
	// RateLimitPerSecond caps the API destination's invocations.
	RateLimitPerSecond int32
	// EventBusName is the bus of the rule; Step Functions publishes on the
	// default bus.
	EventBusName string
	// DeadLetterARN is the SQS queue that receives events EventBridge could
	// not deliver after its retries. It is required: status changes must
	// not be dropped silently.
	DeadLetterARN string
	// RoleARN is the IAM role EventBridge assumes to invoke the API
	// destination (events:InvokeApiDestination); required.
	RoleARN string
	// MaximumRetryAttempts and MaximumEventAgeSeconds are the target's
	// retry policy.
	MaximumRetryAttempts   int32
	MaximumEventAgeSeconds int32
}

// Result reports the resources Apply left in place and what it did.
type Result struct {
	ConnectionARN     string
	APIDestinationARN string
	RuleARN           string
	Changes           []Change
}

// Change is what Apply did to one resource.
type Change struct {
	Resource string // "connection", "api destination", "rule", "target"
	Name     string
	Action   string // "created", "updated" or "unchanged"
}

// String returns e.g. `connection "substate-ingest" created`.
func (c Change) String() string { return c.Resource + ` "` + c.Name + `" ` + c.Action }

// Changed reports whether Apply created or updated anything.
func (r *Result) Changed() bool {
	for _, c := range r.Changes {
		if c.Action != "unchanged" {
			return true
		}
	}
	return false
}

// Apply creates or updates the connection, the API destination, the rule
// and its target, in that order, and returns their ARNs. The settings are
// checked before any call (EINVALID).
func (s Setup) Apply(ctx context.Context) (Result, error) {
	s.defaults()
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	var res Result
	var err error
	if res.ConnectionARN, err = s.ensureConnection(ctx, &res); err != nil {
		return res, err
	}
	if res.APIDestinationARN, err = s.ensureAPIDestination(ctx, &res, res.ConnectionARN); err != nil {
		return res, err
	}
	if res.RuleARN, err = s.ensureRule(ctx, &res); err != nil {
		return res, err
	}
	return res, s.ensureTarget(ctx, &res, res.APIDestinationARN)
}

func (s *Setup) defaults() {
	if s.Name == "" {
		s.Name = DefaultName
	}
	if s.EventBusName == "" {
		s.EventBusName = DefaultEventBusName
	}
	if s.RateLimitPerSecond == 0 {
		s.RateLimitPerSecond = DefaultRateLimitPerSecond
	}
	if s.MaximumRetryAttempts == 0 {
		s.MaximumRetryAttempts = DefaultMaximumRetryAttempts
	}
	if s.MaximumEventAgeSeconds == 0 {
		s.MaximumEventAgeSeconds = DefaultMaximumEventAgeSeconds
	}
	s.Endpoint = IngestURL(s.Endpoint)
}

func (s *Setup) validate() error {
	u, err := url.Parse(s.Endpoint)
	switch {
	case s.Client == nil:
		return substate.Errorf(substate.EINVALID, "eventbridge setup: no client")
	case !validName.MatchString(s.Name):
		return substate.Errorf(substate.EINVALID, "eventbridge setup: name prefix %q must be 1 to 43 letters, digits, '.', '-' or '_'", s.Name)
	case err != nil || u.Scheme != "https" || u.Host == "":
		return substate.Errorf(substate.EINVALID, "eventbridge setup: endpoint %q is not an https URL (API destinations call HTTPS only)", s.Endpoint)
	case s.APIKey == "":
		return substate.Errorf(substate.EINVALID, "eventbridge setup: no ingest API key")
	case !strings.HasPrefix(s.RoleARN, "arn:"):
		return substate.Errorf(substate.EINVALID, "eventbridge setup: role %q is not an IAM role ARN", s.RoleARN)
	case !strings.HasPrefix(s.DeadLetterARN, "arn:"):
		return substate.Errorf(substate.EINVALID, "eventbridge setup: dead-letter queue %q is not an SQS queue ARN", s.DeadLetterARN)
	case s.MaximumRetryAttempts < 0 || s.MaximumRetryAttempts > 185:
		return substate.Errorf(substate.EINVALID, "eventbridge setup: maximum retry attempts %d is outside 0..185", s.MaximumRetryAttempts)
	case s.MaximumEventAgeSeconds < 60 || s.MaximumEventAgeSeconds > 86400:
		return substate.Errorf(substate.EINVALID, "eventbridge setup: maximum event age %d s is outside 60..86400", s.MaximumEventAgeSeconds)
	case s.RateLimitPerSecond < 1:
		return substate.Errorf(substate.EINVALID, "eventbridge setup: rate limit %d is below 1", s.RateLimitPerSecond)
	}
	return nil
}

// validName is a name prefix that keeps every resource name within
// EventBridge's rules (64 characters of [.\-_A-Za-z0-9]).
var validName = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,43}$`)

// IngestURL returns the ingress URL of a worker base URL: IngestPath
// appended, unless the URL already ends with it.
func IngestURL(endpoint string) string {
	base := strings.TrimRight(endpoint, "/")
	if strings.HasSuffix(base, IngestPath) {
		return base
	}
	return base + IngestPath
}

// keyFingerprint is the first 8 bytes of the key's SHA-256, in hex.
func keyFingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

func (s *Setup) connectionName() string  { return s.Name + "-ingest" }
func (s *Setup) destinationName() string { return s.Name + "-ingest" }
func (s *Setup) ruleName() string        { return s.Name + "-stepfunctions-status" }

func (s *Setup) connectionDescription() string {
	return "substate ingest API key (sha256:" + keyFingerprint(s.APIKey) + ")"
}
