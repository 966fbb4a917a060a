package stepfunctions

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/substatehq/substate"
)

// RedriveWindow is how long after an execution stopped Step Functions lets
// it be redriven.
const RedriveWindow = 14 * 24 * time.Hour

// describeHistoryEvents is how many of the newest history events
// DescribeExecution reads to find the current state and its attempts.
const describeHistoryEvents = 100

var _ substate.ExecutionOperator = (*Provider)(nil)

// DescribeExecution describes the execution id (its ARN): DescribeExecution
// for its status, input, output and redrive status, and the newest history
// events (without data) for the last state entered and the attempts of its
// task since.
func (p *Provider) DescribeExecution(ctx context.Context, id string) (substate.ExecutionInfo, error) {
	out, err := p.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(id)}, callOptions(ctx)...)
	if err != nil {
		return substate.ExecutionInfo{}, wrapAction("describe execution", "DescribeExecution", err)
	}
	info := substate.ExecutionInfo{
		Provider: substate.ProviderStepFunctions, ExecutionID: id, Workflow: aws.ToString(out.StateMachineArn),
		ProviderState: string(out.Status), Input: jsonText(out.Input), Output: jsonText(out.Output),
		Error: aws.ToString(out.Error), Cause: aws.ToString(out.Cause),
		StartedAt: aws.ToTime(out.StartDate), StoppedAt: aws.ToTime(out.StopDate),
		Redrives: int(aws.ToInt32(out.RedriveCount)),
		Ended:    out.Status != types.ExecutionStatusRunning && out.Status != types.ExecutionStatusPendingRedrive,
		Stopped:  out.Status == types.ExecutionStatusAborted,
	}
	info.Retryable, info.RetryRefusal = redrivable(out)
	info.KillRefusal = noKill
	hist, err := p.client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(id), ReverseOrder: true, MaxResults: describeHistoryEvents,
		IncludeExecutionData: aws.Bool(false),
	}, callOptions(ctx)...)
	if err != nil {
		return substate.ExecutionInfo{}, wrapAction("get execution history", "GetExecutionHistory", err)
	}
	info.Step, info.Attempts = currentStep(hist.Events)
	return info, nil
}

// redrivable applies Step Functions' redrive rules as the service reports
// them: its redrive status, whose reason covers the 14 days after the stop
// ("Execution redrivable period exceeded", by the service's clock), and the
// statuses a redrive applies to.
func redrivable(out *sfn.DescribeExecutionOutput) (bool, string) {
	switch {
	case out.RedriveStatus == types.ExecutionRedriveStatusNotRedrivable:
		return false, "not redrivable: " + cmp.Or(aws.ToString(out.RedriveStatusReason), "Step Functions says so")
	case out.Status != types.ExecutionStatusFailed && out.Status != types.ExecutionStatusTimedOut && out.Status != types.ExecutionStatusAborted:
		return false, "not redrivable: execution is " + string(out.Status)
	}
	return true, ""
}

// currentStep returns the name of the newest StateEntered event among
// events (newest first) and how many tasks were scheduled since.
func currentStep(events []types.HistoryEvent) (string, int) {
	attempts := 0
	for _, ev := range events {
		if d := ev.StateEnteredEventDetails; d != nil && strings.HasSuffix(string(ev.Type), "StateEntered") {
			return aws.ToString(d.Name), attempts
		}
		if strings.HasSuffix(string(ev.Type), "Scheduled") {
			attempts++
		}
	}
	return "", attempts
}

// jsonText returns a JSON text as it is, and any other string as a JSON
// string; nil for none.
func jsonText(s *string) json.RawMessage {
	if s == nil || *s == "" {
		return nil
	}
	if json.Valid([]byte(*s)) {
		return json.RawMessage(*s)
	}
	b, _ := json.Marshal(*s)
	return b
}

// noKill is why Step Functions refuses a kill.
const noKill = "Step Functions has no kill: stop it without --kill (StopExecution ends it at once, without running Catch or further states)"

// StopExecution stops a running execution with StopExecution, the error
// "Stopped" and the cause. Step Functions has no kill: Kill is refused.
func (p *Provider) StopExecution(ctx context.Context, id string, opts substate.StopOptions) error {
	if opts.Kill {
		return substate.Errorf(substate.EINVALID, "stepfunctions: %s", noKill)
	}
	_, err := p.client.StopExecution(ctx, &sfn.StopExecutionInput{
		ExecutionArn: aws.String(id), Error: aws.String(substate.StopErrorType), Cause: aws.String(substate.Truncate(opts.Cause, maxStopCause)),
	}, callOptions(ctx)...)
	return wrapAction("stop execution", "StopExecution", err)
}

// RetryExecution redrives a failed, timed-out or aborted execution with
// RedriveExecution: it resumes from the state that failed, under the same
// ARN, with redriveCount + 1. The context's idempotency key, when it has
// one, is the redrive's client token (hashed to fit): Step Functions
// answers a repeated token with the first redrive's answer instead of
// redriving again (for 15 minutes).
func (p *Provider) RetryExecution(ctx context.Context, id string) error {
	in := &sfn.RedriveExecutionInput{ExecutionArn: aws.String(id)}
	if key := substate.IdempotencyKey(ctx); key != "" {
		in.ClientToken = aws.String(keyDigest(key, 64))
	}
	_, err := p.client.RedriveExecution(ctx, in, callOptions(ctx)...)
	return wrapAction("redrive execution", "RedriveExecution", err)
}

// RestartExecution starts a new execution of the same state machine with
// the same input, named after the old one with a suffix: random, or
// derived from the context's idempotency key when it has one, so that
// asking again starts nothing new (Step Functions answers the same name
// and input with the execution it started; one that ended since is
// ExecutionAlreadyExists, and it is the restart's).
func (p *Provider) RestartExecution(ctx context.Context, id string) (string, error) {
	out, err := p.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(id)}, callOptions(ctx)...)
	if err != nil {
		return "", wrapAction("describe execution", "DescribeExecution", err)
	}
	name := RestartName(aws.ToString(out.Name))
	key := substate.IdempotencyKey(ctx)
	if key != "" {
		name = restartNameFor(aws.ToString(out.Name), key)
	}
	started, err := p.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: out.StateMachineArn, Name: aws.String(name), Input: out.Input,
	}, callOptions(ctx)...)
	if key != "" && ErrorCode(err) == substate.EEXISTS {
		return ExecutionARN(aws.ToString(out.StateMachineArn), name)
	}
	if err != nil {
		return "", wrapAction("start execution", "StartExecution", err)
	}
	return aws.ToString(started.ExecutionArn), nil
}

// callOptions are the options of an operator's call: a caller that backs
// off throttling itself (substate.CallerBacksOff, a fleet job) gets a
// throttled answer at once instead of the SDK's retries.
func callOptions(ctx context.Context) []func(*sfn.Options) {
	if substate.CallerBacksOff(ctx) {
		return []func(*sfn.Options){noThrottleRetries}
	}
	return nil
}

// Idempotent reports that the context's idempotency key makes a retry
// (the redrive's client token) and a restart (the new execution's name)
// act once.
func (p *Provider) Idempotent(a substate.ExecutionAction) bool {
	return a == substate.ActionRetry || a == substate.ActionRestart
}

var _ substate.IdempotentOperator = (*Provider)(nil)

// RestartName returns the name of a restart of the execution named old:
// old cut to leave room, "-r", and 8 random hexadecimal digits, within the
// 80 characters Step Functions allows.
func RestartName(old string) string {
	return cutName(old) + "-r" + randomHex()
}

// restartNameFor is RestartName with the suffix derived from an
// idempotency key.
func restartNameFor(old, key string) string {
	return cutName(old) + "-r" + keyDigest(key, 8)
}

// cutName cuts an execution name to leave room for a suffix.
func cutName(old string) string {
	if r := []rune(old); len(r) > 70 {
		return string(r[:70])
	}
	return old
}

// keyDigest is the first n hexadecimal digits of an idempotency key's
// SHA-256: printable, fixed in length, the same for the same key.
func keyDigest(key string, n int) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:n]
}

// GeneratedName returns an execution name for a start that gave none:
// "substate-", the time to the second and 8 random hexadecimal digits.
func GeneratedName(now time.Time) string {
	return "substate-" + now.UTC().Format("20060102T150405Z") + "-" + randomHex()
}

// randomHex returns 8 random hexadecimal digits.
func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// wrapAction is wrap, with an AccessDeniedException turned into an
// EFORBIDDEN error that names the IAM action the credentials lack.
func wrapAction(op, action string, err error) error {
	if denied(err) {
		return substate.WrapError(substate.EFORBIDDEN, err,
			"stepfunctions: %s: access denied: the AWS credentials lack the IAM permission states:%s", op, action)
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ExecutionNotRedrivable" {
		return substate.WrapError(substate.ECONFLICT, err, "stepfunctions: %s: not redrivable: %s", op, api.ErrorMessage())
	}
	return wrap(op, err)
}
