package awstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/substatehq/substate/testkit/awstest"
)

const definition = `{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`

func newSFN(t *testing.T) (*awstest.Server, *sfn.Client, string) {
	t.Helper()
	srv := awstest.New(t)
	machine := srv.AddStateMachine("orders", definition, "arn:aws:iam::123456789012:role/sfn")
	return srv, sfn.NewFromConfig(srv.Config()), machine
}

func TestStartExecution(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	start := func(input string) (*sfn.StartExecutionOutput, error) {
		return client.StartExecution(ctx, &sfn.StartExecutionInput{
			StateMachineArn: aws.String(machine), Name: aws.String("ord-1"), Input: aws.String(input)})
	}
	first, err := start(`{"n":1}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("SameInputWhileRunning", func(t *testing.T) {
		again, err := start(`{"n":1}`)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *again.ExecutionArn, *first.ExecutionArn; got != want {
			t.Fatalf("arn = %s, want %s", got, want)
		}
	})
	t.Run("ErrDifferentInput", func(t *testing.T) {
		_, err := start(`{"n":2}`)
		var e *types.ExecutionAlreadyExists
		if !errors.As(err, &e) {
			t.Fatalf("err = %v, want ExecutionAlreadyExists", err)
		}
	})
	t.Run("ErrClosed", func(t *testing.T) {
		if err := srv.SetStatus(*first.ExecutionArn, "SUCCEEDED", "", ""); err != nil {
			t.Fatal(err)
		}
		_, err := start(`{"n":1}`)
		var e *types.ExecutionAlreadyExists
		if !errors.As(err, &e) {
			t.Fatalf("err = %v, want ExecutionAlreadyExists", err)
		}
	})
	t.Run("ErrNoStateMachine", func(t *testing.T) {
		_, err := client.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(awstest.StateMachineARN("nope"))})
		var e *types.StateMachineDoesNotExist
		if !errors.As(err, &e) {
			t.Fatalf("err = %v, want StateMachineDoesNotExist", err)
		}
	})
}

func TestDescribeExecution(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(awstest.ExecutionARN(machine, "nope"))})
		var e *types.ExecutionDoesNotExist
		if !errors.As(err, &e) || !strings.Contains(e.ErrorMessage(), "nope") {
			t.Fatalf("err = %v, want ExecutionDoesNotExist", err)
		}
	})
	t.Run("Redriven", func(t *testing.T) {
		out, err := client.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(machine), Name: aws.String("r")})
		if err != nil {
			t.Fatal(err)
		}
		a := *out.ExecutionArn
		if err := srv.SetStatus(a, "FAILED", "Boom", "it broke"); err != nil {
			t.Fatal(err)
		}
		if err := srv.Redrive(a); err != nil {
			t.Fatal(err)
		}
		d, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(a)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != types.ExecutionStatusRunning || aws.ToInt32(d.RedriveCount) != 1 || d.StopDate != nil || d.RedriveDate == nil {
			t.Fatalf("status %s, redrives %d, stop %v, redrive date %v", d.Status, aws.ToInt32(d.RedriveCount), d.StopDate, d.RedriveDate)
		}
	})
}

func TestGetExecutionHistoryPages(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	a := awstest.ExecutionARN(machine, "h")
	var events []json.RawMessage
	for i := 1; i <= 7; i++ {
		events = append(events, json.RawMessage(fmt.Sprintf(
			`{"id":%d,"previousEventId":%d,"type":"PassStateEntered","timestamp":1718791230.5,"stateEnteredEventDetails":{"name":"P","input":"{}"}}`, i, i-1)))
	}
	srv.AddExecution(awstest.Execution{ARN: a, StateMachineARN: machine, Name: "h", Status: "RUNNING", Input: "{}", History: events})
	var ids []int64
	p := sfn.NewGetExecutionHistoryPaginator(client, &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(a), ReverseOrder: true, MaxResults: 3, IncludeExecutionData: aws.Bool(false)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			ids = append(ids, e.Id)
			if e.StateEnteredEventDetails.Input != nil {
				t.Fatalf("event %d has input with includeExecutionData false", e.Id)
			}
		}
	}
	if got, want := fmt.Sprint(ids), "[7 6 5 4 3 2 1]"; got != want {
		t.Fatalf("ids = %s, want %s", got, want)
	}
	if got, want := srv.Calls("GetExecutionHistory"), 3; got != want {
		t.Fatalf("calls = %d, want %d", got, want)
	}
	_, err := client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(a), NextToken: aws.String("bogus")})
	var e *types.InvalidToken
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want InvalidToken", err)
	}
}

func TestInjectedErrors(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	describe := func() error {
		_, err := client.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(machine)})
		return err
	}
	t.Run("ThrottleRetried", func(t *testing.T) {
		srv.ResetCalls()
		srv.Throttle("DescribeStateMachine", awstest.MaxAttempts-1)
		if err := describe(); err != nil {
			t.Fatal(err)
		}
		if got, want := srv.Calls("DescribeStateMachine"), awstest.MaxAttempts; got != want {
			t.Fatalf("calls = %d, want %d", got, want)
		}
	})
	t.Run("ErrThrottled", func(t *testing.T) {
		srv.ResetCalls()
		srv.Throttle("", 10)
		defer srv.ClearFailures()
		err := describe()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" {
			t.Fatalf("err = %v, want ThrottlingException", err)
		}
		if got, want := srv.TotalCalls(), awstest.MaxAttempts; got != want {
			t.Fatalf("calls = %d, want %d", got, want)
		}
	})
	t.Run("Err5xx", func(t *testing.T) {
		srv.Fail("DescribeStateMachine", awstest.MaxAttempts, http.StatusInternalServerError, "InternalFailure", "boom")
		err := describe()
		var re *awshttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusInternalServerError {
			t.Fatalf("err = %v, want a 500 response error", err)
		}
		if err := describe(); err != nil {
			t.Fatalf("after the injected errors: %v", err)
		}
	})
}

func TestPutEventsPartialFailure(t *testing.T) {
	ctx := context.Background()
	srv := awstest.New(t)
	client := eventbridge.NewFromConfig(srv.Config())
	srv.FailEntries(func(e awstest.PutEventsEntry) (string, string) {
		if strings.Contains(e.Detail, `"fail"`) {
			return "InternalFailure", "Internal service error."
		}
		return "", ""
	})
	out, err := client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		{Source: aws.String("substate"), DetailType: aws.String("t"), Detail: aws.String(`{"ok":1}`)},
		{Source: aws.String("substate"), DetailType: aws.String("t"), Detail: aws.String(`{"fail":1}`)},
		{Source: aws.String("substate"), DetailType: aws.String("t"), Detail: aws.String(`not json`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.FailedEntryCount, int32(2); got != want {
		t.Fatalf("failed = %d, want %d", got, want)
	}
	if out.Entries[0].EventId == nil || aws.ToString(out.Entries[1].ErrorCode) != "InternalFailure" || aws.ToString(out.Entries[2].ErrorCode) != "MalformedDetail" {
		t.Fatalf("entries = %+v", out.Entries)
	}
	if got := srv.Events(); len(got) != 1 || got[0].EventBusName != "default" {
		t.Fatalf("events = %+v", got)
	}
	many := make([]ebtypes.PutEventsRequestEntry, 11)
	for i := range many {
		many[i] = ebtypes.PutEventsRequestEntry{Source: aws.String("s"), DetailType: aws.String("t"), Detail: aws.String("{}")}
	}
	_, err = client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: many})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Fatalf("err = %v, want ValidationException", err)
	}
}

func TestThrottleBetween(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	now := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	srv.Now = func() time.Time { return now }
	arn := awstest.ExecutionARN(machine, "ord-1")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-1", Status: "RUNNING", StartDate: now})
	srv.ThrottleBetween("GetExecutionHistory", now.Add(time.Minute), now.Add(2*time.Minute))
	history := func() error {
		_, err := client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn)},
			func(o *sfn.Options) { o.RetryMaxAttempts = 1 })
		return err
	}
	for _, tt := range []struct {
		name      string
		at        time.Duration
		throttled bool
	}{
		{"Before", 59 * time.Second, false},
		{"From", time.Minute, true},
		{"Inside", 90 * time.Second, true},
		{"Until", 2 * time.Minute, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now = now.Truncate(time.Hour).Add(tt.at)
			err := history()
			var api smithy.APIError
			if got := errors.As(err, &api) && api.ErrorCode() == "ThrottlingException"; got != tt.throttled {
				t.Fatalf("throttled = %v (%v), want %v", got, err, tt.throttled)
			}
			if _, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)}); err != nil {
				t.Fatalf("another operation: %v", err)
			}
		})
	}
	log := srv.Log()
	if len(log) != 8 || log[2].Op != "GetExecutionHistory" || log[2].ExecutionARN != arn || log[2].Failed != "ThrottlingException" ||
		log[3].Failed != "" || !log[2].At.Equal(now.Truncate(time.Hour).Add(time.Minute)) {
		t.Fatalf("log = %+v", log)
	}
}

// TestQuota: an API's token bucket lets its size through at once, then
// one call per refill, as Step Functions' quotas do.
func TestQuota(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	now := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	srv.Now = func() time.Time { return now }
	arn := awstest.ExecutionARN(machine, "ord-1")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-1", Status: "RUNNING", StartDate: now})
	srv.Quota("DescribeExecution", 3, 2)
	describe := func() bool {
		_, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)},
			func(o *sfn.Options) { o.RetryMaxAttempts = 1 })
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ThrottlingException"
	}
	var got []bool
	for range 4 {
		got = append(got, describe())
	}
	now = now.Add(500 * time.Millisecond) // one token back
	got = append(got, describe(), describe())
	if want := []bool{false, false, false, true, false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("throttled %v, want %v", got, want)
	}
	if _, err := client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn)}); err != nil {
		t.Errorf("another API: %v", err)
	}
}

// TestRedriveClientToken: a redrive repeated with its client token is
// answered as the first, and redrives nothing more, as Step Functions
// does for the last 10 tokens that redrove the execution, up to 15
// minutes after each was first used.
func TestRedriveClientToken(t *testing.T) {
	ctx := context.Background()
	srv, client, machine := newSFN(t)
	now := time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)
	srv.Now = func() time.Time { return now }
	arn := awstest.ExecutionARN(machine, "ord-1")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "ord-1", Status: "FAILED", StartDate: now, StopDate: now})
	redrive := func(token string) error {
		_, err := client.RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(arn), ClientToken: aws.String(token)})
		return err
	}
	if err := redrive("job-1/t/x"); err != nil {
		t.Fatal(err)
	}
	if err := redrive("job-1/t/x"); err != nil {
		t.Fatalf("the same token again: %v", err)
	}
	if e, _ := srv.Execution(arn); e.RedriveCount != 1 {
		t.Errorf("redrive count %d, want 1", e.RedriveCount)
	}
	notRedrivable := func(err error) bool {
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ExecutionNotRedrivable"
	}
	if err := redrive("another"); !notRedrivable(err) {
		t.Errorf("another token on a running execution: %v", err)
	}
	now = now.Add(awstest.RedriveTokenTime + time.Second)
	if err := redrive("job-1/t/x"); !notRedrivable(err) {
		t.Errorf("the token after %v: %v, want it no longer answered", awstest.RedriveTokenTime, err)
	}
	for i := range awstest.RedriveTokens + 1 { // fail and redrive again, 11 times
		if err := srv.SetStatus(arn, "FAILED", "Err", ""); err != nil {
			t.Fatal(err)
		}
		if err := redrive(fmt.Sprint("token-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := redrive("token-1"); err != nil {
		t.Errorf("one of the last %d tokens again: %v", awstest.RedriveTokens, err)
	}
	if err := redrive("token-0"); !notRedrivable(err) {
		t.Errorf("the token before the last %d again: %v, want it no longer answered", awstest.RedriveTokens, err)
	}
	if e, _ := srv.Execution(arn); e.RedriveCount != 2+awstest.RedriveTokens {
		t.Errorf("redrive count %d, want %d", e.RedriveCount, 2+awstest.RedriveTokens)
	}
}
