package stepfunctions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/awstest"
	"github.com/substatehq/substate/mapping"
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
	for _, tt := range []struct {
		name                 string
		withHistory          bool
		max, pageSize, calls int
		ids                  string
	}{
		{"AllPages", true, 100, 5, 3, "[12 11 10 9 8 7 6 5 4 3 2 1]"},
		{"Bounded", true, 7, 5, 2, "[12 11 10 9 8 7 6]"},
		{"OnePage", true, 4, 100, 1, "[12 11 10 9]"},
		{"NoHistory", false, 100, 5, 0, "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.MaxHistoryEvents, p.HistoryPageSize = tt.max, tt.pageSize
			srv.ResetCalls()
			raw, err := p.Poll(ctx, arn, tt.withHistory)
			if err != nil {
				t.Fatal(err)
			}
			_, got := decodePayload(t, raw)
			ids := make([]any, len(got))
			for i, e := range got {
				ids[i] = e["id"]
				if d, _ := e["stateEnteredEventDetails"].(map[string]any); d["input"] != nil {
					t.Fatalf("event %v carries its input; history is read without execution data", e["id"])
				}
			}
			if s := fmt.Sprint(ids); s != tt.ids {
				t.Fatalf("event ids = %s, want %s (newest first)", s, tt.ids)
			}
			if srv.Calls("GetExecutionHistory") != tt.calls || srv.Calls("DescribeExecution") != 1 {
				t.Fatalf("calls: history %d, describe %d; want %d and 1", srv.Calls("GetExecutionHistory"), srv.Calls("DescribeExecution"), tt.calls)
			}
		})
	}
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
		want := substate.StepFunctionsRevision(0, substate.RankTerminal, 12)
		if ev.SubState != substate.StateFailed || ev.RetryCount != 2 || ev.ErrorMessage != "payment provider returned HTTP 503" || ev.Revision != want {
			t.Fatalf("mapped = %+v", ev)
		}
	})
}
