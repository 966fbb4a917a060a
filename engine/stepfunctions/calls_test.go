package stepfunctions_test

import (
	"context"
	"sync"
	"testing"

	"github.com/substatehq/substate/engine/stepfunctions"
	"github.com/substatehq/substate/internal/awstest"
)

// TestCountCalls checks that the counting option sees every request the
// server receives, retried attempts included.
func TestCountCalls(t *testing.T) {
	srv := awstest.New(t)
	var mu sync.Mutex
	counted := map[string]int{}
	p := stepfunctions.New(srv.Config(), stepfunctions.CountCalls(func(op string) {
		mu.Lock()
		defer mu.Unlock()
		counted[op]++
	}))
	arn := seedStatus(t, srv, "sfn-status-running.json")
	srv.Throttle("GetExecutionHistory", 1)
	if _, err := p.Poll(context.Background(), arn, true); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"DescribeExecution", "GetExecutionHistory"} {
		if got, want := counted[op], srv.Calls(op); got != want {
			t.Errorf("%s counted %d, server received %d", op, got, want)
		}
	}
	if counted["GetExecutionHistory"] != 2 {
		t.Errorf("history calls counted = %d, want 2 (a throttled attempt and its retry)", counted["GetExecutionHistory"])
	}
}
