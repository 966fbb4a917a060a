package consumers_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

func TestNormalizerPublishesCanonicalEvents(t *testing.T) {
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, nil)
	pub := publishers.NewJetStream(b.JetStream)
	ctx := context.Background()
	raws := []substate.RawEvent{
		{Kind: substate.RawEventBridge, ID: "eb-1", Body: fixtures.Provider("sfn-status-failed.json")},
		{Kind: substate.RawRestate, ID: "wh-1", Body: fixtures.Provider("restate-invocation-backing-off.json")},
	}
	for _, raw := range raws {
		if err := pub.PublishRaw(ctx, raw); err != nil {
			t.Fatal(err)
		}
	}
	pipelinetest.WaitFor(t, "two canonical events", func() bool { return streamCount(t, b.JetStream, substate.StreamEvents) == 2 })
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))

	msgs := streamMsgs(t, b.JetStream, substate.StreamEvents)
	for i, m := range msgs {
		e, err := substate.UnmarshalEvent(m.Data)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got, want := m.Header.Get(substate.HeaderMsgID), mapping.EventID(raws[i], 0); got != want {
			t.Errorf("event %d Nats-Msg-Id = %q, want the deterministic %q", i, got, want)
		}
		if got := m.Header.Get(substate.HeaderContentType); got != substate.CloudEventsMediaType {
			t.Errorf("event %d Content-Type = %q", i, got)
		}
		if got, want := m.Subject, substate.EventsSubject(e.Data.TenantID); got != want {
			t.Errorf("event %d subject = %q, want %q", i, got, want)
		}
	}
	first, _ := substate.UnmarshalEvent(msgs[0].Data)
	if d := first.Data; d.SubState != substate.StateFailed || d.ErrorMessage != "payment provider returned HTTP 503" {
		t.Errorf("failed status: sub-state %q error %q", d.SubState, d.ErrorMessage)
	}
	second, _ := substate.UnmarshalEvent(msgs[1].Data)
	if d := second.Data; d.SubState != substate.StateBackingOff || d.TenantID != "globex" {
		t.Errorf("restate row: sub-state %q tenant %q", d.SubState, d.TenantID)
	}
}

func TestNormalizerRedeliveryHasOneEffect(t *testing.T) {
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, nil)
	body := fixtures.Provider("sfn-status-running.json")
	// The same source event published under two ids (as after the
	// deduplication window) maps to two canonical events; under the same id
	// the server keeps one.
	publishRaw(t, b.JetStream, substate.RawEventBridge, "same", body)
	publishRaw(t, b.JetStream, substate.RawEventBridge, "same", body)
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	if n := streamCount(t, b.JetStream, substate.StreamEvents); n != 1 {
		t.Fatalf("events stream holds %d, want 1", n)
	}
}

func TestNormalizerDeadLetters(t *testing.T) {
	b := newBus(t)
	pipelinetest.RunNormalizer(t, b, nil)
	failed := string(fixtures.Provider("sfn-status-failed.json"))
	cases := []struct {
		id, body, code, reason string
		kind                   substate.RawKind
	}{
		{"garbage", `{"detail-type": "Step Fun`, substate.EINVALID, "decode", substate.RawEventBridge},
		{"detail-type", strings.Replace(failed, "Step Functions Execution Status Change", "EC2 Instance State-change Notification", 1),
			substate.EINVALID, "detail-type", substate.RawEventBridge},
		{"no-tenant", strings.Replace(strings.Replace(failed, `customerId`, `buyer`, 1), `tenantId`, `owner`, 1),
			substate.ENOTENANT, "tenant", substate.RawEventBridge},
		{"unknown-kind", `{}`, substate.EINVALID, "unknown raw kind", substate.RawKind("acme.thing")},
	}
	for _, c := range cases {
		publishRaw(t, b.JetStream, c.kind, c.id, []byte(c.body))
	}
	pipelinetest.WaitFor(t, "dead letters", func() bool { return streamCount(t, b.JetStream, substate.StreamDLQ) == uint64(len(cases)) })
	pipelinetest.WaitFor(t, "raw messages acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	if n := streamCount(t, b.JetStream, substate.StreamEvents); n != 0 {
		t.Fatalf("events stream holds %d, want 0", n)
	}
	for i, m := range streamMsgs(t, b.JetStream, substate.StreamDLQ) {
		c := cases[i]
		if got := m.Header.Get("Substate-Original-Msg-Id"); got != c.id {
			t.Errorf("dead letter %d original id = %q, want %q", i, got, c.id)
		}
		if string(m.Data) != c.body {
			t.Errorf("dead letter %s: body not kept as received", c.id)
		}
		reason := m.Header.Get(substate.HeaderDLQReason)
		if !strings.HasPrefix(reason, c.code+": ") || !strings.Contains(reason, c.reason) {
			t.Errorf("dead letter %s reason = %q, want code %q and %q", c.id, reason, c.code, c.reason)
		}
		if m.Header.Get(substate.HeaderDLQStage) != substate.StageNormalize || m.Subject != substate.DLQSubject(substate.StageNormalize) {
			t.Errorf("dead letter %s: stage %q subject %q", c.id, m.Header.Get(substate.HeaderDLQStage), m.Subject)
		}
		if m.Header.Get(substate.HeaderDLQSubject) != substate.RawSubject(c.kind) || m.Header.Get(substate.HeaderDLQSeq) == "" {
			t.Errorf("dead letter %s: origin subject %q seq %q", c.id, m.Header.Get(substate.HeaderDLQSubject), m.Header.Get(substate.HeaderDLQSeq))
		}
	}
}

// failingEvents is an EventPublisher that fails while fail is set.
type failingEvents struct {
	next     substate.EventPublisher
	fail     atomic.Bool
	attempts atomic.Int32
}

func (f *failingEvents) PublishEvents(ctx context.Context, events []substate.Event) error {
	f.attempts.Add(1)
	if f.fail.Load() {
		return substate.WrapError(substate.EUNAVAILABLE, errors.New("stream unavailable"), "publish event")
	}
	return f.next.PublishEvents(ctx, events)
}

func TestNormalizerTransientFailures(t *testing.T) {
	t.Run("RetriedThenPublished", func(t *testing.T) {
		b := newBus(t)
		f := &failingEvents{next: publishers.NewJetStream(b.JetStream)}
		f.fail.Store(true)
		pipelinetest.RunNormalizer(t, b, func(n *consumers.Normalizer) {
			n.Events = f
			n.Retry = consumers.Retry{Base: 20 * time.Millisecond, MaxDeliveries: 50}
		})
		publishRaw(t, b.JetStream, substate.RawEventBridge, "eb-1", fixtures.Provider("sfn-status-running.json"))
		pipelinetest.WaitFor(t, "two failed attempts", func() bool { return f.attempts.Load() >= 2 })
		f.fail.Store(false)
		pipelinetest.WaitFor(t, "the event", func() bool { return streamCount(t, b.JetStream, substate.StreamEvents) == 1 })
		pipelinetest.WaitFor(t, "raw acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
		if n := streamCount(t, b.JetStream, substate.StreamDLQ); n != 0 {
			t.Fatalf("%d dead letters, want none", n)
		}
	})
	t.Run("DeadLetteredAfterMaxDeliveries", func(t *testing.T) {
		b := newBus(t)
		f := &failingEvents{next: publishers.NewJetStream(b.JetStream)}
		f.fail.Store(true)
		pipelinetest.RunNormalizer(t, b, func(n *consumers.Normalizer) {
			n.Events = f
			n.Retry = consumers.Retry{Base: 5 * time.Millisecond, MaxDeliveries: 3}
		})
		publishRaw(t, b.JetStream, substate.RawEventBridge, "eb-1", fixtures.Provider("sfn-status-running.json"))
		pipelinetest.WaitFor(t, "the dead letter", func() bool { return streamCount(t, b.JetStream, substate.StreamDLQ) == 1 })
		pipelinetest.WaitFor(t, "raw acked", pipelinetest.Settled(t, b.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
		if got := f.attempts.Load(); got != 3 {
			t.Errorf("publish attempts = %d, want 3", got)
		}
		m := streamMsgs(t, b.JetStream, substate.StreamDLQ)[0]
		if r := m.Header.Get(substate.HeaderDLQReason); !strings.Contains(r, "gave up after 3 deliveries") || !strings.Contains(r, "stream unavailable") {
			t.Errorf("reason = %q", r)
		}
	})
}

func TestRetryDelay(t *testing.T) {
	r := consumers.Retry{Base: time.Second, Max: 10 * time.Second}
	for _, tc := range []struct {
		deliveries uint64
		want       time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {50, 10 * time.Second}} {
		if got := r.Delay(tc.deliveries); got != tc.want {
			t.Errorf("Delay(%d) = %s, want %s", tc.deliveries, got, tc.want)
		}
	}
}
