package restate_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/testkit/operatortest"
	"github.com/substatehq/substate/testkit/restatetest"
)

// TestOperatorContract runs the operator contract on a real Restate
// server. Restate's cancel and kill take no cause, a cancel is accepted
// (202) and completes once the handler has run its compensations, a
// completed invocation is final (resume takes up only invocations that
// have not completed, a suspended one included), only a completed
// invocation can be restarted, and sys_invocation holds no input.
func TestOperatorContract(t *testing.T) {
	f := operatortest.Features{
		Provider: substate.ProviderRestate, Kill: true, RetryRunning: true, StopPending: true,
	}
	operatortest.Run(t, f, func(t *testing.T) operatortest.Provider {
		rs := restatetest.Start(t)
		var n atomic.Int64
		send := func(handler, status string) func(t *testing.T) string {
			return func(t *testing.T) string {
				t.Helper()
				key := fmt.Sprintf("contract-%d", n.Add(1))
				id := rs.Send(t, "Provision", key, handler, nil, 0)
				rs.WaitRow(t, id, status, func(row map[string]any) bool { return row["status"] == status })
				if handler == "stuck" { // resumed, it succeeds
					rs.Gate(t, key, "open")
				}
				return id
			}
		}
		return operatortest.Provider{
			Operator:    &restate.Operator{Admin: restate.NewClient(rs.AdminURL)},
			Rules:       restate.Rules(),
			Running:     send("nap", "suspended"),
			Succeeded:   send("ok", "completed"),
			Failed:      send("terminal", "completed"),
			Retryable:   send("stuck", "paused"),
			UnknownID:   unknownInvocation,
			InvalidID:   "inv_1bad",
			RunningStep: "nap",
		}
	})
}
