package stepfunctions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/operatortest"
)

// TestOperatorContract runs the operator contract on Step Functions: the
// real SDK client against the local AWS server. Step Functions has no
// kill, keeps a stop's cause, answers a stop of a closed execution as
// done (changing nothing), redrives a failed or aborted execution within
// 14 days of its stop, and restarts any execution under a new name.
func TestOperatorContract(t *testing.T) {
	f := operatortest.Features{
		Provider: substate.ProviderStepFunctions, StopCause: true, StopEndedAnswered: true,
		RetryFailed: true, RestartRunning: true, Input: true,
	}
	operatortest.Run(t, f, func(t *testing.T) operatortest.Provider {
		srv, p := newProvider(t)
		machine := ensure(t, p)
		var n atomic.Int64
		start := func(t *testing.T) string {
			t.Helper()
			i := n.Add(1)
			x, err := p.Start(context.Background(), engine.StartRequest{
				Workflow: machine, Name: fmt.Sprintf("contract-%d", i), TenantID: fmt.Sprintf("t-%d", i),
				Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			})
			if err != nil {
				t.Fatal(err)
			}
			return x.ID
		}
		ended := func(status, errName, cause string) func(t *testing.T) string {
			return func(t *testing.T) string {
				t.Helper()
				arn := start(t)
				if err := srv.SetStatus(arn, status, errName, cause); err != nil {
					t.Fatal(err)
				}
				return arn
			}
		}
		failed := ended("FAILED", "Boom", "card declined")
		return operatortest.Provider{
			Operator:  p,
			Rules:     stepfunctions.Rules(""),
			Running:   start,
			Succeeded: ended("SUCCEEDED", "", ""),
			Failed:    failed,
			Retryable: failed,
			Expired: func(t *testing.T) string {
				arn := failed(t)
				stopped := srv.Now().Add(-awstest.RedriveWindow - time.Hour)
				if err := srv.UpdateExecution(arn, func(e *awstest.Execution) { e.StopDate = stopped }); err != nil {
					t.Fatal(err)
				}
				return arn
			},
			UnknownID: awstest.ExecutionARN(machine, "nope"),
			InvalidID: "not-an-arn",
		}
	})
}
