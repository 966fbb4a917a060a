package stepfunctions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/mapping/sfnhistory"
)

// Compile-time check that the provider is a poller for the reconciler.
var _ substate.StatusPoller = (*Provider)(nil)

// Limits of the history reads.
const (
	firstPageSize = 1000   // GetExecutionHistory's largest page, for a first read
	maxHistory    = 25_001 // Step Functions keeps at most 25,000 events
	cursorIdle    = time.Hour
)

// PollPayload is the body of a stepfunctions.poll raw event: the
// DescribeExecution response and history events exactly as Step Functions
// returned them (awsJson1_0: camelCase members, timestamps in epoch
// seconds), and when they were read.
type PollPayload struct {
	Execution json.RawMessage `json:"execution"`
	History   PollHistory     `json:"history"`
	PolledAt  time.Time       `json:"polledAt"`
}

// PollHistory holds the history events a poll read that are new since the
// provider's previous read of the execution (at most MaxHistoryEvents,
// newest first) and Prior, the summary of every older event: together they
// say what the whole history says. It is empty when the poll read no
// history.
type PollHistory struct {
	Events []json.RawMessage   `json:"events"`
	Prior  *sfnhistory.Summary `json:"prior,omitempty"`
}

// cursor is what the provider remembers of an execution between polls.
type cursor struct {
	summary sfnhistory.Summary // of every event read so far
	last    PollPayload        // the last poll's payload
	used    time.Time
}

// Describe returns the execution's status as raw evidence: Status.Raw is
// Poll(ctx, executionID, true). The provider does not map statuses; the
// normalizer maps the raw event (mapping.MapPoll) like any other. An
// unknown execution is ENOTFOUND.
func (p *Provider) Describe(ctx context.Context, executionID string) (engine.Status, error) {
	raw, err := p.Poll(ctx, executionID, true)
	if err != nil {
		return engine.Status{}, err
	}
	return engine.Status{Raw: raw}, nil
}

// Poll reads the execution arn and returns it as a raw event of kind
// stepfunctions.poll whose body is a PollPayload. Without withHistory it
// calls DescribeExecution only.
//
// With withHistory it reads the history incrementally: GetExecutionHistory
// in reverse order, without execution data, page by page until it reaches
// the newest event an earlier poll of the execution read, so a poll costs
// one call when nothing happened and a call per page of new events
// otherwise (the first poll reads the whole history, in pages of 1000).
// DescribeExecution is called only when there are new events: every change
// of an execution's status adds one. The retries counted over every event
// ever read are in the payload's summary.
//
// Each API Step Functions throttles backs off (see Backoff), and the SDK
// does not retry a throttled poll call. While GetExecutionHistory backs
// off, a poll returns the DescribeExecution answer with the summary of the
// history read so far, and the execution's history is read when the API
// answers again; while DescribeExecution backs off, a poll that needs it
// fails at once, without a call, with an ETHROTTLED error whose
// substate.RetryAfter is the wait left.
//
// The raw event's id is a hash of the execution and history it carries, so
// polling an unchanged execution twice yields the same id and the second
// publish is deduplicated.
func (p *Provider) Poll(ctx context.Context, arn string, withHistory bool) (substate.RawEvent, error) {
	if !withHistory {
		var payload PollPayload
		if err := p.describe(ctx, arn, &payload); err != nil {
			return substate.RawEvent{}, err
		}
		payload.History.Events = []json.RawMessage{}
		return p.raw(&payload)
	}
	c := p.cursorOf(arn)
	events, err := p.newEvents(ctx, arn, c.summary.ThroughEventID)
	if substate.ErrorCode(err) == substate.ETHROTTLED {
		return p.pollStatus(ctx, arn, c)
	}
	if err != nil {
		return substate.RawEvent{}, err
	}
	if len(events) == 0 && c.last.Execution != nil {
		p.caughtUp(arn)
		return p.raw(&c.last)
	}
	var payload PollPayload
	if err := p.describe(ctx, arn, &payload); err != nil {
		return substate.RawEvent{}, err
	}
	if err := p.fold(c, &payload, events); err != nil {
		return substate.RawEvent{}, err
	}
	p.keep(arn, c, &payload)
	p.caughtUp(arn)
	return p.raw(&payload)
}

// pollStatus is the poll of an execution whose history cannot be read now:
// its DescribeExecution answer, with the summary of the history read so
// far and no new events. A running or failed execution is behind until
// its history is read; a succeeded one shows no retries, so it is not.
func (p *Provider) pollStatus(ctx context.Context, arn string, c *cursor) (substate.RawEvent, error) {
	var payload PollPayload
	if err := p.describe(ctx, arn, &payload); err != nil {
		return substate.RawEvent{}, err
	}
	payload.History.Events = []json.RawMessage{}
	if c.summary.ThroughEventID > 0 {
		prior := c.summary
		payload.History.Prior = &prior
	}
	if statusOf(payload.Execution) == "SUCCEEDED" {
		p.caughtUp(arn)
	} else {
		p.fellBehind(arn)
	}
	return p.raw(&payload)
}

// describe calls DescribeExecution and keeps its answer in the payload,
// unless the API backs off.
func (p *Provider) describe(ctx context.Context, arn string, payload *PollPayload) error {
	if p.backingOff(opDescribe) > 0 {
		return p.throttledErr(opDescribe, nil)
	}
	_, err := p.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)},
		captureBody(&payload.Execution), noThrottleRetries)
	if ErrorCode(err) == substate.ETHROTTLED {
		return p.throttledErr(opDescribe, err)
	}
	return wrap("describe execution", err)
}

// fold puts the newest MaxHistoryEvents new events in the payload, the
// summary of everything older in its Prior, and moves the cursor past
// every event.
func (p *Provider) fold(c *cursor, payload *PollPayload, newestFirst []json.RawMessage) error {
	decoded := make([]sfnhistory.Event, len(newestFirst))
	for i, raw := range newestFirst {
		if err := json.Unmarshal(raw, &decoded[i]); err != nil {
			return substate.WrapError(substate.EINTERNAL, err, "stepfunctions: get execution history: decode event")
		}
	}
	keep := min(len(newestFirst), max(p.MaxHistoryEvents, 1))
	prior := c.summary.Fold(decoded[keep:])
	c.summary = prior.Fold(decoded[:keep])
	payload.History.Events = newestFirst[:keep]
	if prior.ThroughEventID > 0 {
		payload.History.Prior = &prior
	}
	return nil
}

// newEvents reads the history, newest first, down to the event after
// through, and returns those events.
func (p *Provider) newEvents(ctx context.Context, arn string, through int64) ([]json.RawMessage, error) {
	size := firstPageSize
	if through > 0 {
		size = min(max(p.HistoryPageSize, 1), firstPageSize)
	}
	in := &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(arn), ReverseOrder: true,
		IncludeExecutionData: aws.Bool(false), MaxResults: int32(size),
	}
	events := []json.RawMessage{}
	for len(events) < maxHistory {
		if p.backingOff(opHistory) > 0 {
			return nil, p.throttledErr(opHistory, nil)
		}
		var body json.RawMessage
		out, err := p.client.GetExecutionHistory(ctx, in, captureBody(&body), noThrottleRetries)
		if ErrorCode(err) == substate.ETHROTTLED {
			return nil, p.throttledErr(opHistory, err)
		}
		if err != nil {
			return nil, wrap("get execution history", err)
		}
		var page struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, substate.WrapError(substate.EINTERNAL, err, "stepfunctions: get execution history: decode response")
		}
		for _, e := range page.Events {
			var id struct {
				ID int64 `json:"id"`
			}
			if json.Unmarshal(e, &id) == nil && id.ID <= through {
				return events, nil
			}
			events = append(events, e)
		}
		if out.NextToken == nil || len(page.Events) == 0 {
			return events, nil
		}
		in.NextToken = out.NextToken
	}
	return events, nil
}

// raw stamps the poll time and encodes the payload as a raw event.
func (p *Provider) raw(payload *PollPayload) (substate.RawEvent, error) {
	payload.PolledAt = p.Now()
	body, err := json.Marshal(payload)
	if err != nil {
		return substate.RawEvent{}, substate.WrapError(substate.EINTERNAL, err, "stepfunctions: encode poll payload")
	}
	return substate.RawEvent{Kind: substate.RawStepFunctionsPoll, ID: pollID(payload), Body: body}, nil
}

// pollID is "sfn-poll-" and the hex SHA-256 of the execution, history and
// summary bytes: equal observations get equal ids, whenever they were
// polled.
func pollID(pl *PollPayload) string {
	h := sha256.New()
	h.Write(pl.Execution)
	for _, e := range pl.History.Events {
		h.Write([]byte{0})
		h.Write(e)
	}
	if pl.History.Prior != nil {
		b, _ := json.Marshal(pl.History.Prior)
		h.Write([]byte{1})
		h.Write(b)
	}
	return "sfn-poll-" + hex.EncodeToString(h.Sum(nil))
}
