package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// sfnFixture is the Step Functions execution of an EventBridge fixture.
type sfnFixture struct {
	ARN, MachineARN, Name, Input string
	StartDate                    time.Time
}

func readSFNFixture(tb testing.TB, name string) sfnFixture {
	tb.Helper()
	var ev struct {
		Detail struct {
			ExecutionArn, StateMachineArn, Name, Input string
			StartDate                                  int64
		}
	}
	if err := json.Unmarshal(fixtures.Provider(name), &ev); err != nil {
		tb.Fatal(err)
	}
	d := ev.Detail
	return sfnFixture{d.ExecutionArn, d.StateMachineArn, d.Name, d.Input, time.UnixMilli(d.StartDate).UTC()}
}

// addExecution stores the fixture's execution in the fake, running.
func addExecution(srv *awstest.Server, x sfnFixture) {
	srv.AddExecution(awstest.Execution{ARN: x.ARN, StateMachineARN: x.MachineARN, Name: x.Name, Status: "RUNNING",
		Input: x.Input, StartDate: x.StartDate})
}

// newSFN starts a fake Step Functions on the clock and a provider using it
// with the real SDK client.
func newSFN(tb testing.TB, clock *pipelinetest.Clock) (*awstest.Server, *stepfunctions.Provider) {
	tb.Helper()
	srv := awstest.New(tb)
	srv.Now = clock.Now
	p := stepfunctions.New(sdkConfig(srv))
	p.Now = clock.Now
	return srv, p
}

// sdkConfig returns the SDK configuration for the local server.
func sdkConfig(srv *awstest.Server) aws.Config { return srv.Config() }

// newReconciler returns a reconciler on the clock asking p about Step
// Functions tenants.
func newReconciler(view substate.ActiveLister, sfn substate.StatusPoller, pub substate.RawPublisher, clock *pipelinetest.Clock) *reconcile.Reconciler {
	r := reconcile.NewReconciler(view, map[substate.Provider]substate.StatusPoller{substate.ProviderStepFunctions: sfn}, pub)
	r.Now, r.Sleep = clock.Now, clock.Sleep
	return r
}

// applyRunning applies, as the projector would, a running Step Functions
// event for the tenant's execution arn that occurred at the given time.
func applyRunning(tb testing.TB, view *state.DB, tenant, arn string, seq uint64, at time.Time) {
	tb.Helper()
	ev := substate.EventData{TenantID: tenant, Provider: substate.ProviderStepFunctions, ExecutionID: arn, Workflow: "orders",
		SubState: substate.StateRunning, ProviderState: "RUNNING", OccurredAt: at, ExecutionStartedAt: at,
		Revision: mapping.StepFunctionsRevision(0, mapping.RankActive, 0)}
	ev.Normalize()
	if _, err := view.Apply(context.Background(), []substate.Sequenced{{Seq: seq, Event: ev}}); err != nil {
		tb.Fatal(err)
	}
}

func fmtInts(s []int) string { return fmt.Sprint(s) }
