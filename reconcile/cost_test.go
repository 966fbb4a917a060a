package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/reconcile"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// costSettings are the knobs of the documented cost formula.
type costSettings struct {
	every  time.Duration // --sfn-history-interval
	events int           // history events of each execution, read by the first poll
}

// documentedCost is the formula of docs/reconciler.md: the calls one quiet
// running execution costs per hour: one GetExecutionHistory page a poll
// (the first poll reads the whole history in pages of 1000), and one
// DescribeExecution, for the first poll.
func documentedCost(s costSettings) (histories, describes int) {
	polls := int((time.Hour + s.every - 1) / s.every)
	firstPages := max((s.events+999)/1000, 1)
	return polls - 1 + firstPages, 1
}

// kindCost is the calls per hour one execution of a kind cost.
type kindCost struct{ histories, describes int }

// simulatedCost runs the reconciler for one hour of an injected clock over
// quiet running, succeeded and failed tenants (the failed ones from before
// the reconciler started, inside their redrive window), and returns the
// calls Step Functions received per tenant of each kind.
func simulatedCost(t *testing.T, s costSettings, perKind int) map[substate.SubState]kindCost {
	t.Helper()
	ctx := context.Background()
	view := pipelinetest.OpenView(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC))
	view.Now = clock.Now
	srv := awstest.New(t)
	srv.Now = clock.Now
	metrics := reconcile.NewMetrics(nil)
	sfn := stepfunctions.New(sdkConfig(srv), stepfunctions.CountCalls(func(op string) {
		metrics.CountCall(substate.ProviderStepFunctions, op)
	}))
	sfn.Now = clock.Now

	kinds := []substate.SubState{substate.StateRunning, substate.StateSucceeded, substate.StateFailed}
	kindOf := map[string]substate.SubState{}
	var seq uint64
	for i := range len(kinds) * perKind {
		name := fmt.Sprintf("t%03d", i)
		kind := kinds[i%len(kinds)]
		arn := seedQuiet(t, srv, name, clock.Now().Add(-time.Hour), s.events)
		kindOf[arn] = kind
		seq++
		applyRunning(t, view, name, arn, seq, clock.Now().Add(-10*time.Minute))
		if kind != substate.StateRunning {
			seq++
			applyStatus(t, view, name, arn, seq, kind, clock.Now().Add(-5*time.Minute))
		}
	}
	clock.Advance(time.Minute)
	r := newReconciler(view, sfn, publishers.NewJetStream(bustest.Open(t).JetStream), clock)
	r.Every, r.Metrics, r.QPS = s.every, metrics, 0
	r.Failed, r.RecheckWindow, r.RecheckEvery, r.FailedQPS = view, stepfunctions.RedriveWindow, time.Hour, 0.5
	end := clock.Now().Add(time.Hour)
	for next := clock.Now(); next.Before(end); next = next.Add(time.Second) {
		clock.Set(next)
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []string{"DescribeExecution", "GetExecutionHistory"} {
		if got, want := pipelinetest.Counter(t, metrics.APICalls, "stepfunctions", op), float64(srv.Calls(op)); got != want {
			t.Errorf("metric counted %v %s calls, the server received %v", got, op, want)
		}
	}
	perArn := map[string]*kindCost{}
	for _, c := range srv.Log() {
		k := perArn[c.ExecutionARN]
		if k == nil {
			k = &kindCost{}
			perArn[c.ExecutionARN] = k
		}
		if c.Op == "GetExecutionHistory" {
			k.histories++
		} else {
			k.describes++
		}
	}
	costs := map[substate.SubState]kindCost{}
	for arn, kind := range kindOf {
		got := kindCost{}
		if k := perArn[arn]; k != nil {
			got = *k
		}
		if want, seen := costs[kind]; seen && want != got {
			t.Errorf("%s executions cost %+v and %+v: not the same for each", kind, want, got)
		}
		costs[kind] = got
	}
	return costs
}

// seedQuiet stores a running execution whose history has the given number
// of events, all older than the simulated hour.
func seedQuiet(t *testing.T, srv *awstest.Server, name string, started time.Time, events int) string {
	t.Helper()
	machine := awstest.StateMachineARN("orders")
	arn := awstest.ExecutionARN(machine, name)
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: name, Status: "RUNNING",
		Input: `{"tenantId":"` + name + `"}`, StartDate: started})
	history := make([]json.RawMessage, events)
	for i := range history {
		history[i] = json.RawMessage(fmt.Sprintf(`{"id":%d,"previousEventId":%d,"type":"WaitStateEntered","timestamp":%d}`,
			i+1, i, started.Unix()))
	}
	if err := srv.SetHistory(arn, history); err != nil {
		t.Fatal(err)
	}
	return arn
}

// applyStatus applies a Step Functions event of the given sub-state.
func applyStatus(t *testing.T, view *state.DB, tenant, arn string, seq uint64, sub substate.SubState, at time.Time) {
	t.Helper()
	ev := substate.EventData{TenantID: tenant, Provider: substate.ProviderStepFunctions, ExecutionID: arn, Workflow: "orders",
		SubState: sub, ProviderState: strings.ToUpper(string(sub)), OccurredAt: at,
		Revision: mapping.StepFunctionsRevision(0, mapping.RankActive, int64(seq))}
	if sub.Terminal() {
		ev.Revision = mapping.StepFunctionsRevision(0, mapping.RankTerminal, 0)
	}
	ev.Normalize()
	if _, err := view.Apply(context.Background(), []substate.Sequenced{{Seq: seq, Event: ev}}); err != nil {
		t.Fatal(err)
	}
}

// docCostTable returns the rows of the cost table in docs/reconciler.md.
func docCostTable(t *testing.T) [][]int {
	t.Helper()
	f, err := os.Open("../docs/reconciler.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]int
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- cost-table"):
			in = true
		case strings.HasPrefix(line, "<!-- end cost-table"):
			in = false
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| execution") && !strings.HasPrefix(line, "| ---"):
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			var row []int
			for _, c := range cells[1:] {
				n, err := strconv.Atoi(strings.TrimSpace(c))
				if err != nil {
					t.Fatalf("cost table cell %q: %v", c, err)
				}
				row = append(row, n)
			}
			rows = append(rows, row)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("cost table has %d rows, want 3 (succeeded, failed, running)", len(rows))
	}
	return rows
}

// TestReconcilerCostMatchesDocs checks the documented API-call cost: the
// formula, the table at the default flags, and what a simulated hour of
// sweeps really sends to Step Functions agree.
func TestReconcilerCostMatchesDocs(t *testing.T) {
	defaults := costSettings{every: reconcile.DefaultPollEvery, events: 40}
	table := docCostTable(t)
	naive := 2 * int(time.Hour/(10*time.Second))
	for i, row := range table {
		if row[3] != naive {
			t.Errorf("row %d: polling every 10 s = %d, want %d", i, row[3], naive)
		}
		if row[2] != row[0]+row[1] {
			t.Errorf("row %d: total %d is not %d + %d", i, row[2], row[0], row[1])
		}
	}
	h, d := documentedCost(defaults)
	if running := table[2]; running[0] != h || running[1] != d {
		t.Errorf("documented running execution = %d + %d calls, the formula gives %d + %d", running[0], running[1], h, d)
	}
	sim := simulatedCost(t, defaults, 3)
	for i, kind := range []substate.SubState{substate.StateSucceeded, substate.StateFailed, substate.StateRunning} {
		if got := sim[kind]; got.histories != table[i][0] || got.describes != table[i][1] {
			t.Errorf("simulated hour: %d + %d calls per %s execution, documented %d + %d", got.histories, got.describes, kind, table[i][0], table[i][1])
		}
	}
	// Other settings follow the same formula: polls every 40 s, a history
	// of 2,500 events read in three pages by the first poll.
	other := costSettings{every: 40 * time.Second, events: 2500}
	h, d = documentedCost(other)
	if got := simulatedCost(t, other, 2)[substate.StateRunning]; got.histories != h || got.describes != d {
		t.Errorf("%+v: simulated %d + %d calls, the formula gives %d + %d", other, got.histories, got.describes, h, d)
	}
}
