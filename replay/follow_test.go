package replay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
)

// follow collects the sequences an event feed yields until it has n, or
// fails the test after a while.
func follow(tb testing.TB, f *replay.EventFeed, q substate.EventStreamQuery, n int, more func()) []uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []uint64
	for e, err := range f.FollowEvents(ctx, q) {
		if err != nil {
			tb.Fatal(err)
		}
		if ev, derr := substate.UnmarshalEvent(e.Data); derr != nil || q.TenantID != "" && ev.Data.TenantID != q.TenantID {
			tb.Fatalf("sequence %d: %+v %v", e.Seq, ev.Data, derr)
		}
		if got = append(got, e.Seq); len(got) == n {
			return got
		}
		if len(got) == 1 && more != nil {
			go more()
		}
	}
	tb.Fatalf("the feed ended after %v (%v)", got, ctx.Err())
	return nil
}

// TestEventFeed: a feed yields what is stored from where it is asked to
// start, then what is stored while it runs, one tenant's or all; it ends
// without an error when its context does; and however many follow, no
// consumer is left on the stream.
func TestEventFeed(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publish(t, b, tenantEvent("a", 1), tenantEvent("b", 1), tenantEvent("a", 2)) // 1, 2, 3
	feed := replay.NewEventFeed(newReader(b))
	feed.Tail.Poll = 10 * time.Millisecond
	later := func() { time.Sleep(50 * time.Millisecond); publish(t, b, tenantEvent("b", 2), tenantEvent("a", 3)) } // 4, 5

	if got := follow(t, feed, substate.EventStreamQuery{FromStart: true, TenantID: "a"}, 3, later); !equal(got, []uint64{1, 3, 5}) {
		t.Errorf("tenant a from the start: %v", got)
	}
	if got := follow(t, feed, substate.EventStreamQuery{AfterSeq: 2}, 3, nil); !equal(got, []uint64{3, 4, 5}) {
		t.Errorf("after 2: %v", got)
	}
	if got := follow(t, feed, substate.EventStreamQuery{Since: time.Now().Add(-time.Hour)}, 2, nil); !equal(got, []uint64{1, 2}) {
		t.Errorf("since an hour ago: %v", got)
	}
	newOnly := func() {
		time.Sleep(50 * time.Millisecond)
		publish(t, b, tenantEvent("c", 1)) // 6
	}
	// From now on: nothing already stored, then the event published.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go newOnly()
	for e, err := range feed.FollowEvents(ctx, substate.EventStreamQuery{}) {
		if err != nil || e.Seq != 6 {
			t.Fatalf("new events only: %d %v", e.Seq, err)
		}
		break
	}

	// Many followers at once, each ended by its context: no error, no consumer.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+i)*time.Millisecond)
			defer cancel()
			for _, err := range feed.FollowEvents(ctx, substate.EventStreamQuery{TenantID: "nobody"}) {
				t.Errorf("follower %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := bustest.Consumers(t, b.JetStream, substate.StreamEvents); n != 0 {
		t.Fatalf("%d consumers after the follows, want 0", n)
	}
}

// TestDeadLetters reads SUBSTATE_DLQ page by page, by stage and by time,
// with each dead letter's headers and payload, and the tenant a payload
// names.
func TestDeadLetters(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	dlq := func(stage, body string) {
		t.Helper()
		publishMsg(t, b.JetStream, substate.DLQSubject(stage), []byte(body), map[string]string{
			substate.HeaderDLQStage: stage, substate.HeaderDLQReason: "invalid: no", substate.HeaderDLQSubject: "substate.raw.x", substate.HeaderDLQSeq: "7",
		})
	}
	dlq("ingest", "not json\xff")
	dlq("normalize", `{"detail":{"input":"{\"tenantId\":\"acme-1\"}"}}`)
	dlq("normalize", `{"data":{"tenantId":"globex"}}`)
	r := replay.DeadLetters{Reader: newReader(b)}
	page, err := r.DeadLetters(context.Background(), substate.DeadLetterQuery{Limit: 2})
	if err != nil || len(page.DeadLetters) != 2 || page.NextAfterSeq != 2 {
		t.Fatalf("first page: %+v %v", page, err)
	}
	d := page.DeadLetters[0]
	if d.Seq != 1 || d.Stage != "ingest" || d.Reason != "invalid: no" || d.SubjectSeq != 7 || d.Size != 9 || string(d.Payload) != "\"not json\uFFFD\"" {
		t.Errorf("a body that is not JSON: %+v %s", d, d.Payload)
	}
	if d := page.DeadLetters[1]; d.TenantID != "acme-1" || !strings.HasPrefix(string(d.Payload), `{"detail"`) {
		t.Errorf("a Step Functions payload: %+v", d)
	}
	page, err = r.DeadLetters(context.Background(), substate.DeadLetterQuery{AfterSeq: 2})
	if err != nil || len(page.DeadLetters) != 1 || page.DeadLetters[0].TenantID != "globex" || page.NextAfterSeq != 0 {
		t.Errorf("last page: %+v %v", page, err)
	}
	page, err = r.DeadLetters(context.Background(), substate.DeadLetterQuery{Stage: "normalize", Since: time.Now().Add(-time.Minute)})
	if err != nil || len(page.DeadLetters) != 2 {
		t.Errorf("normalize since a minute ago: %+v %v", page, err)
	}
	if page, err := r.DeadLetters(context.Background(), substate.DeadLetterQuery{Since: time.Now().Add(time.Minute)}); err != nil || len(page.DeadLetters) != 0 {
		t.Errorf("since a minute ahead: %+v %v", page, err)
	}
}
