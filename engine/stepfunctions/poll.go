package stepfunctions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
)

// Compile-time check that the provider is a poller for the reconciler.
var _ substate.StatusPoller = (*Provider)(nil)

// PollPayload is the body of a stepfunctions.poll raw event: the
// DescribeExecution response and the recent history events exactly as Step
// Functions returned them (awsJson1_0: camelCase members, timestamps in
// epoch seconds), newest event first, and when they were read.
type PollPayload struct {
	Execution json.RawMessage `json:"execution"`
	History   PollHistory     `json:"history"`
	PolledAt  time.Time       `json:"polledAt"`
}

// PollHistory holds the history events of a poll; it is empty when the poll
// read no history.
type PollHistory struct {
	Events []json.RawMessage `json:"events"`
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

// Poll reads the execution arn with DescribeExecution and, when withHistory
// is set, its newest history events (GetExecutionHistory in reverse order,
// without execution data, up to MaxHistoryEvents in pages of
// HistoryPageSize). It returns them as a raw event of kind
// stepfunctions.poll whose body is a PollPayload. The raw event's id is a
// hash of what Step Functions returned, so polling an unchanged execution
// twice yields the same id and the second publish is deduplicated.
//
// A poll costs one call without history and one more per history page.
func (p *Provider) Poll(ctx context.Context, arn string, withHistory bool) (substate.RawEvent, error) {
	var payload PollPayload
	_, err := p.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)},
		captureBody(&payload.Execution))
	if err != nil {
		return substate.RawEvent{}, wrap("describe execution", err)
	}
	payload.History.Events = []json.RawMessage{}
	if withHistory {
		if payload.History.Events, err = p.history(ctx, arn); err != nil {
			return substate.RawEvent{}, err
		}
	}
	payload.PolledAt = p.Now()
	body, err := json.Marshal(payload)
	if err != nil {
		return substate.RawEvent{}, substate.WrapError(substate.EINTERNAL, err, "stepfunctions: encode poll payload")
	}
	return substate.RawEvent{Kind: substate.RawStepFunctionsPoll, ID: pollID(&payload), Body: body}, nil
}

// history reads up to MaxHistoryEvents history events, newest first. The
// page size stays the same on every page, as Step Functions asks of callers
// that pass a nextToken.
func (p *Provider) history(ctx context.Context, arn string) ([]json.RawMessage, error) {
	limit := max(p.MaxHistoryEvents, 1)
	in := &sfn.GetExecutionHistoryInput{
		ExecutionArn:         aws.String(arn),
		ReverseOrder:         true,
		IncludeExecutionData: aws.Bool(false),
		MaxResults:           int32(min(max(p.HistoryPageSize, 1), limit, 1000)),
	}
	events := []json.RawMessage{}
	for len(events) < limit {
		var body json.RawMessage
		out, err := p.client.GetExecutionHistory(ctx, in, captureBody(&body))
		if err != nil {
			return nil, wrap("get execution history", err)
		}
		var page PollHistory
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, substate.WrapError(substate.EINTERNAL, err, "stepfunctions: get execution history: decode response")
		}
		events = append(events, page.Events...)
		if out.NextToken == nil || len(page.Events) == 0 {
			break
		}
		in.NextToken = out.NextToken
	}
	return events[:min(len(events), limit)], nil
}

// pollID is "sfn-poll-" and the hex SHA-256 of the execution and history
// bytes: equal observations get equal ids, whenever they were polled.
func pollID(pl *PollPayload) string {
	h := sha256.New()
	h.Write(pl.Execution)
	for _, e := range pl.History.Events {
		h.Write([]byte{0})
		h.Write(e)
	}
	return "sfn-poll-" + hex.EncodeToString(h.Sum(nil))
}

// captureBody returns a client option that stores the body of a successful
// response in dst while leaving it readable for the SDK's deserializer. The
// middleware runs innermost in the deserialize step, before the operation's
// deserializer reads the body; on a retried call the last attempt wins.
func captureBody(dst *json.RawMessage) func(*sfn.Options) {
	capture := middleware.DeserializeMiddlewareFunc("substateCaptureBody", func(
		ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler,
	) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		resp, ok := out.RawResponse.(*smithyhttp.Response)
		if err != nil || !ok || resp.StatusCode/100 != 2 {
			return out, md, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return out, md, err
		}
		*dst = b
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return out, md, nil
	})
	return func(o *sfn.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(capture, middleware.After)
		})
	}
}
