package stepfunctions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
)

// TestPollWhileHistoryThrottled polls an execution while Step Functions
// throttles GetExecutionHistory: the poll returns the described status with
// the summary of the history read before, calls the history API again only
// after its backoff, and reads the history it missed once it answers.
func TestPollWhileHistoryThrottled(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	now := time.Date(2024, 6, 19, 10, 5, 0, 0, time.UTC)
	p.Now = func() time.Time { return now }
	srv.Now = p.Now
	p.Backoff.Rand = func() float64 { return 0 } // the shortest waits: 0.5 s, 1 s, 2 s, …
	var backoffs []time.Duration
	behind := -1
	p.OnBackoff = func(op string, d time.Duration) {
		if op == "GetExecutionHistory" {
			backoffs = append(backoffs, d)
		}
	}
	p.OnBehind = func(n int) { behind = n }
	arn := seedStatus(t, srv, "sfn-status-running.json")
	history := historyFixture(t)
	if err := srv.SetHistory(arn, history[:6]); err != nil {
		t.Fatal(err)
	}
	first, err := p.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetHistory(arn, history[:8]); err != nil { // a task timed out: backing off
		t.Fatal(err)
	}
	srv.ThrottleBetween("GetExecutionHistory", now, now.Add(10*time.Second))
	srv.ResetCalls()
	poll := func(t *testing.T) (substate.RawEvent, stepfunctions.PollPayload) {
		t.Helper()
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		var pl stepfunctions.PollPayload
		if err := json.Unmarshal(raw.Body, &pl); err != nil {
			t.Fatal(err)
		}
		return raw, pl
	}
	t.Run("StatusWithThePriorSummary", func(t *testing.T) {
		raw, pl := poll(t)
		if len(pl.History.Events) != 0 || pl.History.Prior == nil || pl.History.Prior.ThroughEventID != 6 {
			t.Fatalf("history = %d events, prior %+v; want none new and the summary through event 6", len(pl.History.Events), pl.History.Prior)
		}
		if got, want := mapPoll(t, raw), mapPoll(t, first); got.SubState != want.SubState || got.Revision != want.Revision {
			t.Fatalf("mapped %s rev %d, want what the last read said: %s rev %d", got.SubState, got.Revision, want.SubState, want.Revision)
		}
		if h, d := srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"); h != 1 || d != 1 {
			t.Fatalf("calls: history %d, describe %d; want one throttled history call, no SDK retry, and a describe", h, d)
		}
		if behind != 1 || len(backoffs) != 1 || backoffs[0] != 500*time.Millisecond {
			t.Fatalf("behind %d, backoffs %v", behind, backoffs)
		}
	})
	t.Run("NoCallWhileBackingOff", func(t *testing.T) {
		now = now.Add(400 * time.Millisecond)
		poll(t)
		if h := srv.Calls("GetExecutionHistory"); h != 1 {
			t.Fatalf("history calls = %d, want none during the backoff", h)
		}
	})
	t.Run("BackoffGrows", func(t *testing.T) {
		now = now.Add(time.Second)
		poll(t)
		if len(backoffs) != 2 || backoffs[1] != time.Second {
			t.Fatalf("backoffs %v, want 0.5 s then 1 s", backoffs)
		}
	})
	t.Run("CatchesUp", func(t *testing.T) {
		now = now.Add(10 * time.Second)
		raw, pl := poll(t)
		if len(pl.History.Events) != 2 || behind != 0 || backoffs[len(backoffs)-1] != 0 {
			t.Fatalf("%d new events, behind %d, backoffs %v; want the 2 missed events read, nothing behind, the backoff over", len(pl.History.Events), behind, backoffs)
		}
		if ev := mapPoll(t, raw); ev.SubState != substate.StateBackingOff || ev.RetryCount != 2 {
			t.Fatalf("mapped %s, retries %d; want backing-off, 2", ev.SubState, ev.RetryCount)
		}
	})
}
