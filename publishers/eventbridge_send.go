package publishers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/substatehq/substate"
)

// TooLargeCode is the failure code of an event above the entry size limit;
// such an event is never sent.
const TooLargeCode = "EntryTooLarge"

// permanentCodes are PutEvents entry error codes that a resend cannot fix.
var permanentCodes = map[string]bool{
	TooLargeCode:                          true,
	"EncodeFailed":                        true,
	"InvalidArgument":                     true,
	"MalformedDetail":                     true,
	"ValidationException":                 true,
	"AccessDeniedException":               true,
	"NotAuthorizedForSourceException":     true,
	"NotAuthorizedForDetailTypeException": true,
}

// EventBridgeFailure is an event EventBridge did not accept: the CloudEvent
// id and the entry's last error code and message.
type EventBridgeFailure struct {
	EventID string
	Code    string
	Message string
}

// EventBridgeError lists the events a Publish call could not publish.
type EventBridgeError struct {
	Total  int // events given to Publish
	Failed []EventBridgeFailure
}

// Error names up to five failed events and their errors.
func (e *EventBridgeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d events not published:", len(e.Failed), e.Total)
	for i, f := range e.Failed {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, " %s (%s: %s)", f.EventID, f.Code, f.Message)
	}
	return b.String()
}

// failuresError returns the *substate.Error of a Publish that gave up on
// some events: ETOOLARGE when every one was too large, EINVALID when every
// one was refused for good, else EUNAVAILABLE (retry later).
func failuresError(total int, failures []EventBridgeFailure) error {
	code, tooLarge := substate.EINVALID, true
	for _, f := range failures {
		tooLarge = tooLarge && f.Code == TooLargeCode
		if !permanentCodes[f.Code] {
			code = substate.EUNAVAILABLE
		}
	}
	if tooLarge {
		code = substate.ETOOLARGE
	}
	return substate.WrapError(code, &EventBridgeError{Total: total, Failed: failures}, "eventbridge: put events")
}

// send puts entries in batches and returns the entries to send again and
// the ones refused for good. A failed request ends it with that error; the
// entries it did not send are returned with the ones to retry.
func (p *EventBridge) send(ctx context.Context, entries []entry) (retry []entry, refused []EventBridgeFailure, err error) {
	for len(entries) > 0 {
		n := batchLen(entries)
		batch := entries[:n]
		entries = entries[n:]
		reqs := make([]types.PutEventsRequestEntry, n)
		for i := range batch {
			reqs[i] = batch[i].req
		}
		out, err := p.Client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: reqs})
		if err != nil {
			retry = append(append(retry, batch...), entries...)
			return retry, refused, wrapRequest(err)
		}
		if len(out.Entries) != n {
			return nil, refused, substate.Errorf(substate.EINTERNAL, "eventbridge: put events: %d results for %d entries", len(out.Entries), n)
		}
		for i, r := range out.Entries {
			if r.ErrorCode == nil {
				p.published.Add(1)
				continue
			}
			e := batch[i]
			e.last.Code, e.last.Message = *r.ErrorCode, aws.ToString(r.ErrorMessage)
			if permanentCodes[e.last.Code] {
				refused = append(refused, e.last)
			} else {
				retry = append(retry, e)
			}
		}
	}
	return retry, refused, nil
}

// batchLen returns how many of the first entries fit in one request.
func batchLen(entries []entry) int {
	n, size := 0, 0
	for n < len(entries) && n < EventBridgeMaxEntries && size+entries[n].size <= EventBridgeMaxEntrySize {
		size += entries[n].size
		n++
	}
	return max(n, 1)
}

// wrapRequest gives a failed PutEvents request its substate code:
// ETHROTTLED, EUNAVAILABLE for 5xx and network errors, EINVALID for a
// refused request, EUNAUTHORIZED for credentials.
func wrapRequest(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("eventbridge: put events: %w", err)
	}
	code := substate.EINTERNAL
	var api smithy.APIError
	var resp *awshttp.ResponseError
	var send *smithyhttp.RequestSendError
	var netErr net.Error
	switch {
	case errors.As(err, &api) && strings.Contains(api.ErrorCode(), "Throttl"):
		code = substate.ETHROTTLED
	case errors.As(err, &resp) && resp.HTTPStatusCode() >= 500, errors.As(err, &send), errors.As(err, &netErr):
		code = substate.EUNAVAILABLE
	case api != nil && (api.ErrorCode() == "AccessDeniedException" || api.ErrorCode() == "UnrecognizedClientException"):
		code = substate.EUNAUTHORIZED
	case api != nil && api.ErrorFault() == smithy.FaultClient:
		code = substate.EINVALID
	}
	return substate.WrapError(code, err, "eventbridge: put events")
}
