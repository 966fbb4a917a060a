package stepfunctions_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
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
	srv.Fail("GetExecutionHistory", 1, http.StatusServiceUnavailable, "ServiceUnavailable", "try again")
	if _, err := p.Poll(context.Background(), arn, true); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"DescribeExecution", "GetExecutionHistory"} {
		if got, want := counted[op], srv.Calls(op); got != want {
			t.Errorf("%s counted %d, server received %d", op, got, want)
		}
	}
	if counted["GetExecutionHistory"] != 2 {
		t.Errorf("history calls counted = %d, want 2 (a failed attempt and its retry)", counted["GetExecutionHistory"])
	}
}

// TestBudget checks that the budget option spends at most its calls a
// second after a burst of one second's worth: 25 calls at 10 a second take
// at least 1.5 s (a lower bound: a slow machine only takes longer).
func TestBudget(t *testing.T) {
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config(), stepfunctions.Budget(10))
	arn := seedStatus(t, srv, "sfn-status-running.json")
	start := time.Now()
	for range 25 {
		if _, err := p.Poll(context.Background(), arn, false); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 1400*time.Millisecond {
		t.Errorf("25 calls took %v: over a budget of 10 a second", elapsed)
	}
	if got := srv.Calls("DescribeExecution"); got != 25 {
		t.Errorf("server received %d calls, want 25", got)
	}
}
