package stepfunctions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

// seedStatus stores the execution of an EventBridge status fixture in the
// fake and returns its ARN.
func seedStatus(t *testing.T, srv *awstest.Server, name string) string {
	t.Helper()
	var ev struct {
		Detail struct {
			ExecutionArn, StateMachineArn, Name, Status string
			StartDate, StopDate                         *int64
			Input                                       string
			Error, Cause                                *string
		}
	}
	if err := json.Unmarshal(fixture(t, name), &ev); err != nil {
		t.Fatal(err)
	}
	d := ev.Detail
	x := awstest.Execution{ARN: d.ExecutionArn, StateMachineARN: d.StateMachineArn, Name: d.Name, Status: d.Status,
		Input: d.Input, StartDate: time.UnixMilli(*d.StartDate).UTC()}
	if d.StopDate != nil {
		x.StopDate = time.UnixMilli(*d.StopDate).UTC()
	}
	if d.Error != nil {
		x.Error = *d.Error
	}
	if d.Cause != nil {
		x.Cause = *d.Cause
	}
	srv.AddExecution(x)
	return x.ARN
}

// mapPoll maps a poll raw event the way the normalizer does; the fixtures'
// inputs carry a customerId, no tenantId.
func mapPoll(t *testing.T, raw substate.RawEvent) substate.EventData {
	t.Helper()
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "input:$.customerId")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := mapping.New(mapping.Config{Tenants: rules}).Map(raw)
	if err != nil || len(evs) != 1 {
		t.Fatalf("map poll: %v, %d events\n%s", err, len(evs), raw.Body)
	}
	return evs[0]
}

func TestDescribeStatusFixtures(t *testing.T) {
	for _, tt := range []struct {
		fixture, status string
		want            substate.SubState
		wantError       string
	}{
		{"sfn-status-running.json", "RUNNING", substate.StateRunning, ""},
		{"sfn-status-succeeded.json", "SUCCEEDED", substate.StateSucceeded, ""},
		{"sfn-status-failed.json", "FAILED", substate.StateFailed, "payment provider returned HTTP 503"},
		{"sfn-status-timed-out.json", "TIMED_OUT", substate.StateFailed, "States.Timeout"},
		{"sfn-status-aborted.json", "ABORTED", substate.StateFailed, "OperatorCancelled: cancelled by on-call via StopExecution"},
	} {
		t.Run(tt.status, func(t *testing.T) {
			srv, p := newProvider(t)
			arn := seedStatus(t, srv, tt.fixture)
			st, err := p.Describe(context.Background(), arn)
			if err != nil {
				t.Fatal(err)
			}
			if st.Raw.Kind != substate.RawStepFunctionsPoll || !strings.HasPrefix(st.Raw.ID, "sfn-poll-") {
				t.Fatalf("status = kind %s, id %s; want a poll raw event", st.Raw.Kind, st.Raw.ID)
			}
			x, _ := decodePayload(t, st.Raw)
			if x["status"] != tt.status || x["executionArn"] != arn {
				t.Fatalf("payload execution = %v", x)
			}
			ev := mapPoll(t, st.Raw)
			if ev.SubState != tt.want || ev.ErrorMessage != tt.wantError || ev.ExecutionID != arn || ev.TenantID != "cus_88412" {
				t.Fatalf("mapped = %s %q %s tenant %s; want %s %q", ev.SubState, ev.ErrorMessage, ev.ExecutionID, ev.TenantID, tt.want, tt.wantError)
			}
		})
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, p := newProvider(t)
		_, err := p.Describe(context.Background(), awstest.ExecutionARN(awstest.StateMachineARN("orders"), "nope"))
		wantCode(t, err, substate.ENOTFOUND)
	})
}

func TestPollHistory(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	arn := seedStatus(t, srv, "sfn-status-running.json")
	var events []json.RawMessage
	for i := 1; i <= 12; i++ {
		events = append(events, json.RawMessage(fmt.Sprintf(
			`{"id":%d,"previousEventId":%d,"type":"PassStateEntered","timestamp":1718791230.%03d,"stateEnteredEventDetails":{"name":"P","input":"{\"big\":true}"}}`, i, i-1, i)))
	}
	if err := srv.SetHistory(arn, events); err != nil {
		t.Fatal(err)
	}
	ids := func(t *testing.T, raw substate.RawEvent) string {
		t.Helper()
		_, got := decodePayload(t, raw)
		ids := make([]any, len(got))
		for i, e := range got {
			ids[i] = e["id"]
			if d, _ := e["stateEnteredEventDetails"].(map[string]any); d["input"] != nil {
				t.Fatalf("event %v carries its input; history is read without execution data", e["id"])
			}
		}
		return fmt.Sprint(ids)
	}
	calls := func() string {
		return fmt.Sprintf("history %d, describe %d", srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"))
	}
	p.MaxHistoryEvents, p.HistoryPageSize = 7, 2
	t.Run("FirstPollReadsEverything", func(t *testing.T) {
		srv.ResetCalls()
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		// One page of 1000; the newest 7 events verbatim, the 5 older in the summary.
		if got := ids(t, raw); got != "[12 11 10 9 8 7 6]" {
			t.Fatalf("event ids = %s, want [12 11 10 9 8 7 6] (newest first)", got)
		}
		var pl stepfunctions.PollPayload
		if err := json.Unmarshal(raw.Body, &pl); err != nil || pl.History.Prior == nil || pl.History.Prior.ThroughEventID != 5 || pl.History.Prior.Events != 5 {
			t.Fatalf("prior = %+v, %v; want the summary of events 1 to 5", pl.History.Prior, err)
		}
		if got := calls(); got != "history 1, describe 1" {
			t.Fatalf("calls: %s", got)
		}
	})
	t.Run("NothingNewCostsOneCall", func(t *testing.T) {
		srv.ResetCalls()
		if _, err := p.Poll(ctx, arn, true); err != nil {
			t.Fatal(err)
		}
		if got := calls(); got != "history 1, describe 0" {
			t.Fatalf("calls: %s", got)
		}
	})
	t.Run("ReadsOnlyNewEvents", func(t *testing.T) {
		more := slices.Clone(events)
		for i := 13; i <= 17; i++ {
			more = append(more, json.RawMessage(fmt.Sprintf(`{"id":%d,"previousEventId":%d,"type":"PassStateEntered","timestamp":1718791231.%03d}`, i, i-1, i)))
		}
		if err := srv.SetHistory(arn, more); err != nil {
			t.Fatal(err)
		}
		srv.ResetCalls()
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, raw); got != "[17 16 15 14 13]" {
			t.Fatalf("event ids = %s, want the 5 new ones", got)
		}
		// Pages of 2 down to event 12: 17 16 | 15 14 | 13 12.
		if got := calls(); got != "history 3, describe 1" {
			t.Fatalf("calls: %s", got)
		}
	})
	t.Run("NoHistory", func(t *testing.T) {
		srv.ResetCalls()
		raw, err := p.Poll(ctx, arn, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, raw); got != "[]" || calls() != "history 0, describe 1" {
			t.Fatalf("event ids %s, calls %s", got, calls())
		}
	})
}

func TestPollID(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	arn := seedStatus(t, srv, "sfn-status-running.json")
	first, err := p.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	p.Now = func() time.Time { return time.Now() }
	again, err := p.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != again.ID {
		t.Fatalf("ids %s and %s differ for an unchanged execution", first.ID, again.ID)
	}
	if err := srv.SetStatus(arn, "SUCCEEDED", "", ""); err != nil {
		t.Fatal(err)
	}
	done, err := p.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	if done.ID == first.ID {
		t.Fatal("the id did not change with the status")
	}
}

// TestPollRetryHistory checks that the poll payload carries what mapping
// needs to find retries, backing-off and the last error.
func TestPollRetryHistory(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	history := historyFixture(t)
	t.Run("BackingOff", func(t *testing.T) {
		arn := seedStatus(t, srv, "sfn-status-running.json")
		// Cut after the TaskTimedOut: the Retry interval is running.
		if err := srv.SetHistory(arn, history[:8]); err != nil {
			t.Fatal(err)
		}
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		ev := mapPoll(t, raw)
		if ev.SubState != substate.StateBackingOff || ev.RetryCount != 2 || ev.ErrorType != "States.Timeout" {
			t.Fatalf("mapped = %s, retries %d, error %s; want backing-off, 2 (one retried failure, one waiting), States.Timeout", ev.SubState, ev.RetryCount, ev.ErrorType)
		}
	})
	t.Run("PollingLoop", func(t *testing.T) {
		// A task fails, a Catch takes the failure to a Wait and back to the
		// task: each visit after a caught failure is a retry.
		srv, p := newProvider(t)
		arn := seedStatus(t, srv, "sfn-status-running.json")
		var loop []json.RawMessage
		add := func(typ, state string) {
			e := map[string]any{"id": len(loop) + 1, "previousEventId": len(loop), "type": typ, "timestamp": 1718791242.0 + float64(len(loop))}
			if state != "" {
				e["stateEnteredEventDetails"] = map[string]any{"name": state}
			}
			if typ == "TaskFailed" {
				e["taskFailedEventDetails"] = map[string]any{"error": "Job.NotReady", "cause": "still provisioning"}
			}
			b, _ := json.Marshal(e)
			loop = append(loop, b)
		}
		add("ExecutionStarted", "")
		for range 3 {
			add("TaskStateEntered", "CheckJob")
			add("TaskScheduled", "")
			add("TaskStarted", "")
			add("TaskFailed", "")
			add("WaitStateEntered", "Pause")
		}
		if err := srv.SetHistory(arn, loop); err != nil {
			t.Fatal(err)
		}
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		// Two visits after caught failures; the third failure is waiting.
		if ev := mapPoll(t, raw); ev.SubState != substate.StateRunning || ev.RetryCount != 2 || ev.Step != "Pause" {
			t.Fatalf("mapped = %s, retries %d, step %s; want running, 2, Pause", ev.SubState, ev.RetryCount, ev.Step)
		}
	})
	t.Run("FailedWithOnlyError", func(t *testing.T) {
		arn := seedStatus(t, srv, "sfn-status-failed.json")
		if err := srv.UpdateExecution(arn, func(x *awstest.Execution) { x.Error, x.Cause = "Provisioning.GaveUp", "" }); err != nil {
			t.Fatal(err)
		}
		raw, err := p.Poll(ctx, arn, false)
		if err != nil {
			t.Fatal(err)
		}
		if ev := mapPoll(t, raw); ev.ErrorMessage != "Provisioning.GaveUp" {
			t.Fatalf("message %q, want the error: a Fail state with only an error", ev.ErrorMessage)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		arn := seedStatus(t, srv, "sfn-status-failed.json")
		if err := srv.SetHistory(arn, history); err != nil {
			t.Fatal(err)
		}
		raw, err := p.Poll(ctx, arn, true)
		if err != nil {
			t.Fatal(err)
		}
		ev := mapPoll(t, raw)
		want := mapping.StepFunctionsRevision(0, mapping.RankTerminal, 12)
		if ev.SubState != substate.StateFailed || ev.RetryCount != 2 || ev.ErrorMessage != "payment provider returned HTTP 503" || ev.Revision != want {
			t.Fatalf("mapped = %+v", ev)
		}
	})
}

// TestPollAtTheHistoryLimit reads an execution that ended as Step
// Functions ends one at its 25,000-event history quota: a polling loop
// whose failures a Catch took, then ExecutionFailed as event 25,000 with
// States.Runtime. The first read takes 25 pages of 1000, the retry count is
// every lap of the loop, and the error is the quota's.
func TestPollAtTheHistoryLimit(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	arn := seedStatus(t, srv, "sfn-status-failed.json")
	var events []json.RawMessage
	add := func(typ, details string) {
		id := len(events) + 1
		events = append(events, json.RawMessage(fmt.Sprintf(`{"id":%d,"previousEventId":%d,"type":%q,"timestamp":1718791242.%03d%s}`,
			id, id-1, typ, id%1000, details)))
	}
	add("ExecutionStarted", "")
	laps := 0
	lap := []struct{ typ, details string }{
		{"TaskStateEntered", `,"stateEnteredEventDetails":{"name":"CheckJob"}`}, {"TaskScheduled", ""}, {"TaskStarted", ""},
		{"TaskFailed", `,"taskFailedEventDetails":{"error":"Job.NotReady","cause":"still running"}`},
		{"WaitStateEntered", `,"stateEnteredEventDetails":{"name":"Pause"}`}, {"WaitStateExited", ""},
	}
	for i := 0; len(events) < 24_999; i++ {
		if i%len(lap) == 0 {
			laps++
		}
		add(lap[i%len(lap)].typ, lap[i%len(lap)].details)
	}
	add("ExecutionFailed", `,"executionFailedEventDetails":{"error":"States.Runtime","cause":"The execution reached the maximum number of history events (25000)."}`)
	if err := srv.SetHistory(arn, events); err != nil {
		t.Fatal(err)
	}
	if err := srv.UpdateExecution(arn, func(x *awstest.Execution) {
		x.Error, x.Cause = "States.Runtime", "The execution reached the maximum number of history events (25000)."
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := p.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	if h, d := srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"); h != 25 || d != 1 {
		t.Fatalf("calls: history %d, describe %d; want 25 pages of 1000 and one describe", h, d)
	}
	ev := mapPoll(t, raw)
	want := mapping.StepFunctionsRevision(0, mapping.RankTerminal, 25_000)
	if ev.SubState != substate.StateFailed || ev.RetryCount != laps-1 || ev.Revision != want ||
		ev.ErrorMessage != "States.Runtime: The execution reached the maximum number of history events (25000)." {
		t.Fatalf("mapped = %s, retries %d (want %d), revision %d (want %d), error %q", ev.SubState, ev.RetryCount, laps-1, ev.Revision, want, ev.ErrorMessage)
	}
	if len(raw.Body) > 64<<10 {
		t.Fatalf("the poll's raw event is %d bytes: the newest events and a summary, not the whole history", len(raw.Body))
	}
	srv.ResetCalls()
	if _, err := p.Poll(ctx, arn, true); err != nil || srv.TotalCalls() != 1 {
		t.Fatalf("a second read: %v, %d calls; want one page saying nothing is new", err, srv.TotalCalls())
	}
}
