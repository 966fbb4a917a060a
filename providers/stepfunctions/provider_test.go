package stepfunctions_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

func TestEnsureWorkflow(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		srv, p := newProvider(t)
		arn := ensure(t, p)
		if got, want := arn, awstest.StateMachineARN("orders"); got != want {
			t.Fatalf("arn = %s, want %s", got, want)
		}
		again := ensure(t, p)
		if again != arn {
			t.Fatalf("second arn = %s, want %s", again, arn)
		}
		if got, want := srv.Calls("CreateStateMachine"), 1; got != want {
			t.Fatalf("CreateStateMachine calls = %d, want %d", got, want)
		}
		if got, want := srv.Calls("DescribeStateMachine"), 2; got != want {
			t.Fatalf("DescribeStateMachine calls = %d, want %d", got, want)
		}
	})
	t.Run("ChangedDefinitionUpdated", func(t *testing.T) {
		srv, p := newProvider(t)
		old := `{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}`
		machine := srv.AddStateMachine("orders", old, roleARN)
		var versions []string
		p.OnUpdate = func(_, version string) { versions = append(versions, version) }
		ensure(t, p)
		out, err := sfn.NewFromConfig(srv.Config()).DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(machine)})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(out.Definition); got != definition || srv.Calls("CreateStateMachine") != 0 {
			t.Fatalf("definition = %s after %d creates, want the new one", got, srv.Calls("CreateStateMachine"))
		}
		if got := srv.Versions(machine); len(got) != 1 || got[0] != definition || len(versions) != 1 || versions[0] != machine+":1" {
			t.Fatalf("versions %v, reported %v: want the new definition published once", got, versions)
		}
		ensure(t, p) // unchanged now: no update
		if n := srv.Calls("UpdateStateMachine"); n != 1 {
			t.Fatalf("%d UpdateStateMachine calls, want 1", n)
		}
	})
	t.Run("SameDefinitionAsJSON", func(t *testing.T) {
		srv, p := newProvider(t)
		srv.AddStateMachine("orders", `{ "StartAt": "Charge", "States": { "Charge": { "Type": "Pass", "End": true } } }`, roleARN)
		ensure(t, p)
		if n := srv.Calls("UpdateStateMachine"); n != 0 {
			t.Fatalf("%d UpdateStateMachine calls for the same definition, want 0", n)
		}
	})
	t.Run("ErrUpdateDenied", func(t *testing.T) {
		srv, p := newProvider(t)
		srv.AddStateMachine("orders", `{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}`, roleARN)
		srv.Deny("UpdateStateMachine", 1)
		_, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(definition)})
		wantCode(t, err, substate.EFORBIDDEN)
		if !strings.Contains(err.Error(), "states:UpdateStateMachine") {
			t.Fatalf("err %q does not name the action", err)
		}
	})
	t.Run("NoAccountID", func(t *testing.T) {
		srv, p := newProvider(t)
		p.AccountID = ""
		srv.AddStateMachine("other", definition, roleARN)
		if got, want := ensure(t, p), awstest.StateMachineARN("orders"); got != want {
			t.Fatalf("arn = %s, want %s", got, want)
		}
		if srv.Calls("ListStateMachines") != 1 || srv.Calls("DescribeStateMachine") != 0 {
			t.Fatalf("calls: list %d, describe %d; want the state machine looked up by listing", srv.Calls("ListStateMachines"), srv.Calls("DescribeStateMachine"))
		}
		// The account is now known from the listed ARNs: describe, no create.
		ensure(t, p)
		if srv.Calls("DescribeStateMachine") != 1 || srv.Calls("CreateStateMachine") != 1 {
			t.Fatalf("calls: describe %d, create %d; want 1 and 1", srv.Calls("DescribeStateMachine"), srv.Calls("CreateStateMachine"))
		}
	})
	t.Run("ErrNoRole", func(t *testing.T) {
		_, p := newProvider(t)
		p.RoleARN = ""
		_, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(definition)})
		wantCode(t, err, substate.EINVALID)
	})
	// AWS errors of each call come back with their code and the operation.
	for _, tt := range []struct{ name, op, awsCode, code, prefix string }{
		{"ErrInvalidDefinition", "CreateStateMachine", "InvalidDefinition", substate.EINVALID, "stepfunctions: create state machine: "},
		{"ErrAlreadyExists", "CreateStateMachine", "StateMachineAlreadyExists", substate.ECONFLICT, "stepfunctions: create state machine: "},
		{"ErrThrottled", "DescribeStateMachine", "ThrottlingException", substate.ETHROTTLED, "stepfunctions: describe state machine: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, p := newProvider(t)
			srv.Fail(tt.op, awstest.MaxAttempts, http.StatusBadRequest, tt.awsCode, "injected")
			_, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(definition)})
			wantCode(t, err, tt.code)
			if !strings.HasPrefix(err.Error(), tt.prefix) || !strings.Contains(err.Error(), tt.awsCode) {
				t.Fatalf("err = %q, want %q and the AWS error", err, tt.prefix)
			}
		})
	}
}

func TestEnsureWorkflowInvalid(t *testing.T) {
	for _, tt := range []struct{ name, wfName, def string }{
		{"NotJSON", "orders", `StartAt: A`},
		{"NotObject", "orders", `["StartAt"]`},
		{"NoStartAt", "orders", `{"States":{"A":{"Type":"Succeed"}}}`},
		{"NoStates", "orders", `{"StartAt":"A"}`},
		{"StartAtUnknown", "orders", `{"StartAt":"B","States":{"A":{"Type":"Succeed"}}}`},
		{"BadName", "orders:v2", definition},
		{"NameWithSpace", "my orders", definition},
		{"EmptyName", "", definition},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, p := newProvider(t)
			_, err := p.EnsureWorkflow(context.Background(), engine.Workflow{Name: tt.wfName, Definition: []byte(tt.def)})
			wantCode(t, err, substate.EINVALID)
			if n := srv.TotalCalls(); n != 0 {
				t.Fatalf("%d calls made, want the definition rejected before any", n)
			}
		})
	}
}

func TestDeleteWorkflow(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	for _, ref := range []string{ensure(t, p), "orders"} {
		ensure(t, p)
		if err := p.DeleteWorkflow(ctx, ref); err != nil {
			t.Fatal(err)
		}
		_, err := sfn.NewFromConfig(srv.Config()).DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(awstest.StateMachineARN("orders"))})
		wantCode(t, stepfunctionsWrap(err), substate.ENOTFOUND)
	}
	t.Run("Unknown", func(t *testing.T) {
		if err := p.DeleteWorkflow(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		if err := p.DeleteWorkflow(ctx, awstest.StateMachineARN("orders")); err != nil {
			t.Fatal(err)
		}
	})
}

// stepfunctionsWrap gives a raw SDK error its substate code.
func stepfunctionsWrap(err error) error {
	if err == nil {
		return nil
	}
	return substate.WrapError(stepfunctions.ErrorCode(err), err, "sdk")
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	now := time.Date(2024, 6, 19, 10, 5, 0, 0, time.UTC)
	p.Now = func() time.Time { return now }
	arn := awstest.ExecutionARN(ensure(t, p), "ord-1")
	describe := func() error { _, err := p.Describe(ctx, arn); return err }
	t.Run("ErrNotFound", func(t *testing.T) {
		err := describe()
		wantCode(t, err, substate.ENOTFOUND)
		if !strings.HasPrefix(err.Error(), "stepfunctions: get execution history: ") || !strings.Contains(err.Error(), "ExecutionDoesNotExist") {
			t.Fatalf("err = %q, want the operation and the AWS error", err)
		}
	})
	t.Run("ErrThrottled", func(t *testing.T) {
		srv.AddExecution(awstest.Execution{ARN: arn, Name: "ord-1", Status: "RUNNING", Input: "{}"})
		srv.ResetCalls()
		srv.Throttle("DescribeExecution", 1)
		err := describe()
		wantCode(t, err, substate.ETHROTTLED)
		if got := srv.Calls("DescribeExecution"); got != 1 {
			t.Fatalf("calls = %d, want 1: the SDK does not retry a throttled poll, the provider backs off", got)
		}
		if wait := substate.RetryAfter(err); wait < stepfunctions.DefaultThrottleBase/2 || wait >= stepfunctions.DefaultThrottleBase {
			t.Fatalf("retry after %v, want the first backoff", wait)
		}
	})
	t.Run("ErrBackingOff", func(t *testing.T) {
		wantCode(t, describe(), substate.ETHROTTLED)
		if got := srv.Calls("DescribeExecution"); got != 1 {
			t.Fatalf("calls = %d, want none while the API backs off", got)
		}
	})
	t.Run("ThrottledThenOK", func(t *testing.T) {
		now = now.Add(stepfunctions.DefaultThrottleBase)
		if err := describe(); err != nil {
			t.Fatalf("after the backoff: %v", err)
		}
		if got := srv.Calls("DescribeExecution"); got != 2 {
			t.Fatalf("calls = %d, want 2", got)
		}
	})
	t.Run("ActionsKeepTheSDKRetries", func(t *testing.T) {
		srv.ResetCalls()
		srv.Throttle("StopExecution", awstest.MaxAttempts-1)
		if err := p.StopExecution(ctx, arn, substate.StopOptions{Cause: "test"}); err != nil {
			t.Fatalf("the SDK retryer should absorb %d throttles of an action: %v", awstest.MaxAttempts-1, err)
		}
		if got, want := srv.Calls("StopExecution"), awstest.MaxAttempts; got != want {
			t.Fatalf("calls = %d, want %d", got, want)
		}
		srv.AddExecution(awstest.Execution{ARN: arn, Name: "ord-1", Status: "RUNNING", Input: "{}"})
	})
	t.Run("ErrServerError", func(t *testing.T) {
		srv.Fail("", awstest.MaxAttempts, http.StatusInternalServerError, "InternalFailure", "boom")
		wantCode(t, describe(), substate.EUNAVAILABLE)
	})
	t.Run("ErrNetwork", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		wantCode(t, func() error { _, err := stepfunctions.New(awstest.Config(down.URL)).Describe(ctx, arn); return err }(), substate.EUNAVAILABLE)
	})
	t.Run("ErrCanceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := p.Describe(cctx, arn)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestErrorCode(t *testing.T) {
	if got := stepfunctions.ErrorCode(nil); got != "" {
		t.Fatalf("ErrorCode(nil) = %q, want none", got)
	}
	for code, want := range map[string]string{
		"ExecutionDoesNotExist":     substate.ENOTFOUND,
		"StateMachineDoesNotExist":  substate.ENOTFOUND,
		"InvalidDefinition":         substate.EINVALID,
		"InvalidArn":                substate.EINVALID,
		"InvalidExecutionInput":     substate.EINVALID,
		"ExecutionAlreadyExists":    substate.EEXISTS,
		"StateMachineAlreadyExists": substate.ECONFLICT,
		"StateMachineLimitExceeded": substate.ECONFLICT,
		"ExecutionLimitExceeded":    substate.ETHROTTLED,
		"ThrottlingException":       substate.ETHROTTLED,
		"AccessDeniedException":     substate.EUNAUTHORIZED,
		"SomethingNew":              substate.EINTERNAL,
	} {
		t.Run(code, func(t *testing.T) {
			srv, p := newProvider(t)
			srv.Fail("", awstest.MaxAttempts, http.StatusBadRequest, code, "injected")
			_, err := p.Describe(context.Background(), awstest.ExecutionARN(awstest.StateMachineARN("x"), "y"))
			wantCode(t, err, want)
		})
	}
}

// TestLoadConfig checks that a provider built from the standard AWS
// configuration honours the region and the service endpoint variables.
func TestLoadConfig(t *testing.T) {
	srv := awstest.New(t)
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION":                  "us-gov-west-1",
		"AWS_ACCESS_KEY_ID":           "AKIDTEST",
		"AWS_SECRET_ACCESS_KEY":       "secret",
		"AWS_ENDPOINT_URL_SFN":        srv.URL,
		"AWS_CONFIG_FILE":             dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	cfg, err := stepfunctions.LoadConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	p := stepfunctions.New(cfg)
	p.AccountID, p.RoleARN = awstest.AccountID, roleARN
	if got, want := p.Region, "us-gov-west-1"; got != want {
		t.Fatalf("region = %s, want %s", got, want)
	}
	// The provider builds a GovCloud ARN; the fake accepts it and creates the
	// state machine under its own region.
	if _, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(definition)}); err != nil {
		t.Fatal(err)
	}
	if srv.Calls("DescribeStateMachine") != 1 {
		t.Fatalf("the provider did not call the endpoint from AWS_ENDPOINT_URL_SFN")
	}
	cfg, err = stepfunctions.LoadConfig(ctx, "eu-west-1")
	if err != nil || cfg.Region != "eu-west-1" {
		t.Fatalf("region override: %v, %v", cfg.Region, err)
	}
}
