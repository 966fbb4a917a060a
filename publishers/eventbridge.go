package publishers

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// What the EventBridge publisher puts on the bus. Rules select substate's
// events with {"source": ["substate"], "detail-type": ["Workflow Sub-State
// Changed"]}; the detail is the CloudEvent, so detail.data.tenantId,
// detail.data.subState and the other canonical fields can be matched too.
const (
	EventBridgeSource     = "substate"
	EventBridgeDetailType = "Workflow Sub-State Changed"
)

// EventBridge limits: entries per PutEvents request, and bytes per entry
// and per request as EventBridge counts them (see entrySize).
const (
	EventBridgeMaxEntries   = 10
	EventBridgeMaxEntrySize = 256 * 1024
)

// DefaultEventBridgeAttempts is how many times an entry is sent at most.
const DefaultEventBridgeAttempts = 4

// EventBridge publishes canonical events to an EventBridge event bus with
// PutEvents. Entries EventBridge fails (FailedEntryCount > 0) are sent again
// with backoff, up to MaxAttempts times; the SDK's own retryer handles
// throttled or failed requests. Set the exported fields before first use;
// it is safe for concurrent use.
//
// EventBridge does not deduplicate: an event whose first attempt succeeded
// is never sent again by Publish, but a caller that retries a failed
// Publish may deliver duplicates. Consumers deduplicate on the CloudEvent id.
type EventBridge struct {
	// Client is the EventBridge client.
	Client *eventbridge.Client
	// EventBusName is the bus name or ARN; empty means the default bus.
	EventBusName string
	// Source and DetailType of every entry; empty means the defaults above.
	Source     string
	DetailType string
	// MaxAttempts bounds how many times an entry is sent.
	MaxAttempts int
	// Backoff returns the delay before the retry-th resend (1, 2, …); nil
	// means DefaultEventBridgeBackoff.
	Backoff func(retry int) time.Duration

	published atomic.Int64
	failed    atomic.Int64
}

var _ substate.EventPublisher = (*EventBridge)(nil)

// NewEventBridge returns a publisher to the bus (empty: the default bus)
// with the default source, detail type, attempts and backoff.
func NewEventBridge(client *eventbridge.Client, eventBusName string) *EventBridge {
	return &EventBridge{
		Client:       client,
		EventBusName: eventBusName,
		Source:       EventBridgeSource,
		DetailType:   EventBridgeDetailType,
		MaxAttempts:  DefaultEventBridgeAttempts,
		Backoff:      DefaultEventBridgeBackoff,
	}
}

// DefaultEventBridgeBackoff waits 100 ms before the first resend and twice
// as long before each next one, at most 5 s, with jitter over the upper half.
func DefaultEventBridgeBackoff(retry int) time.Duration {
	d := min(100*time.Millisecond<<min(retry-1, 6), 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

func (p *EventBridge) backoff(retry int) time.Duration {
	if p.Backoff == nil {
		return DefaultEventBridgeBackoff(retry)
	}
	return p.Backoff(retry)
}

// Published returns how many events EventBridge accepted so far.
func (p *EventBridge) Published() int64 { return p.published.Load() }

// Failed returns how many events Publish gave up on so far.
func (p *EventBridge) Failed() int64 { return p.failed.Load() }

// PublishEvents implements substate.EventPublisher; it is Publish.
func (p *EventBridge) PublishEvents(ctx context.Context, events []substate.Event) error {
	return p.Publish(ctx, events)
}

// Publish sends events to the bus in PutEvents batches of at most 10
// entries and 256 KiB. An event above 256 KiB is not sent. When some events
// are still not accepted after MaxAttempts, or are refused for good, the
// error is a *substate.Error whose cause is an *EventBridgeError naming
// them; the others were published. A request that fails as a whole (after
// the SDK's retries) stops Publish with that error.
func (p *EventBridge) Publish(ctx context.Context, events []substate.Event) error {
	pending, failures := p.entries(events)
	for attempt := 1; len(pending) > 0 && attempt <= max(p.MaxAttempts, 1); attempt++ {
		if attempt > 1 {
			if err := timex.Sleep(ctx, p.backoff(attempt-1)); err != nil {
				p.failed.Add(int64(len(failures) + len(pending)))
				return fmt.Errorf("eventbridge: put events: %w", err)
			}
		}
		var refused []EventBridgeFailure
		var err error
		pending, refused, err = p.send(ctx, pending)
		failures = append(failures, refused...)
		if err != nil {
			p.failed.Add(int64(len(failures) + len(pending)))
			return err
		}
	}
	for _, e := range pending {
		failures = append(failures, e.last)
	}
	if len(failures) == 0 {
		return nil
	}
	p.failed.Add(int64(len(failures)))
	return failuresError(len(events), failures)
}

// entry is one event to send, with its size and its last failure.
type entry struct {
	req  types.PutEventsRequestEntry
	size int
	last EventBridgeFailure
}

// entries builds the PutEvents entries of events; events that cannot be
// sent (too large, not encodable) are returned as failures.
func (p *EventBridge) entries(events []substate.Event) ([]entry, []EventBridgeFailure) {
	out := make([]entry, 0, len(events))
	var failures []EventBridgeFailure
	for _, ev := range events {
		detail, err := substate.MarshalEvent(ev)
		if err != nil {
			failures = append(failures, EventBridgeFailure{EventID: ev.ID, Code: "EncodeFailed", Message: err.Error()})
			continue
		}
		req := types.PutEventsRequestEntry{
			Source:     aws.String(cmp.Or(p.Source, EventBridgeSource)),
			DetailType: aws.String(cmp.Or(p.DetailType, EventBridgeDetailType)),
			Detail:     aws.String(string(detail)),
		}
		if p.EventBusName != "" {
			req.EventBusName = aws.String(p.EventBusName)
		}
		if !ev.Time.IsZero() {
			req.Time = aws.Time(ev.Time.Time)
		}
		if strings.HasPrefix(ev.Data.ExecutionID, "arn:") {
			req.Resources = []string{ev.Data.ExecutionID}
		}
		e := entry{req: req, size: entrySize(&req), last: EventBridgeFailure{EventID: ev.ID}}
		if e.size > EventBridgeMaxEntrySize {
			e.last.Code, e.last.Message = TooLargeCode, fmt.Sprintf("entry of %d bytes is above the 256 KiB limit", e.size)
			failures = append(failures, e.last)
			continue
		}
		out = append(out, e)
	}
	return out, failures
}

// entrySize is the size EventBridge counts for an entry: 14 bytes for a
// time plus the UTF-8 bytes of source, detail type, detail and resources.
func entrySize(e *types.PutEventsRequestEntry) int {
	n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	if e.Time != nil {
		n += 14
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}
