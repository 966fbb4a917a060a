package consumers_test

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
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/engine/stepfunctions"
	"github.com/substatehq/substate/internal/awstest"
	"github.com/substatehq/substate/state"
)

// costSettings are the knobs of the documented cost formula.
type costSettings struct {
	after, interval, history time.Duration
	maxEvents, pageSize      int
	events                   int // history events of each execution
}

// documentedCost is the formula of docs/reconciler.md: the calls one quiet
// running execution costs per hour.
func documentedCost(s costSettings) (describes, histories int) {
	ceil := func(a, b time.Duration) time.Duration { return (a + b - 1) / b }
	p := ceil(s.after, s.interval) * s.interval
	h := ceil(s.history, p) * p
	pages := max((min(s.events, s.maxEvents)+s.pageSize-1)/s.pageSize, 1)
	return int(time.Hour / p), int(time.Hour/h) * pages
}

// simulatedCost runs a reconciler for one hour of an injected clock over
// quiet running, fresh (an event every minute) and terminal tenants, and
// returns the calls Step Functions received per quiet tenant.
func simulatedCost(t *testing.T, s costSettings, perKind int) (describes, histories int) {
	t.Helper()
	ctx := context.Background()
	view := openView(t)
	clock := newClock(time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC))
	srv := awstest.New(t)
	srv.Now = clock.Now
	metrics := consumers.NewReconcileMetrics(nil)
	sfn := stepfunctions.New(sdkConfig(srv), stepfunctions.CountCalls(func(op string) {
		metrics.CountCall(substate.ProviderStepFunctions, op)
	}))
	sfn.Now, sfn.MaxHistoryEvents, sfn.HistoryPageSize = clock.Now, s.maxEvents, s.pageSize

	var seq uint64
	var fresh []string
	for i := range 3 * perKind {
		name := fmt.Sprintf("t%03d", i)
		arn := seedQuiet(t, srv, name, clock.Now().Add(-time.Hour), s.events)
		seq++
		applyRunning(t, view, name, arn, seq, clock.Now().Add(-10*time.Minute))
		switch i % 3 {
		case 1: // fresh: events keep arriving
			fresh = append(fresh, name)
		case 2: // terminal
			seq++
			applyStatus(t, view, name, arn, seq, substate.StateSucceeded, clock.Now().Add(-5*time.Minute))
		}
	}
	r := newReconciler(view, sfn, newPublisher(newBus(t)), clock)
	r.After, r.Interval, r.HistoryInterval, r.Metrics = s.after, s.interval, s.history, metrics
	r.HistoryCost = 1 + (s.maxEvents+s.pageSize-1)/s.pageSize
	end := clock.Now().Add(time.Hour)
	for next := clock.Now(); next.Before(end); next = next.Add(s.interval) {
		clock.Set(next)
		if next.Second() == 0 { // a fresh tenant hears something every minute
			for _, name := range fresh {
				seq++
				applyStatus(t, view, name, awstest.ExecutionARN(awstest.StateMachineARN("orders"), name), seq, substate.StateRunning, next)
			}
		}
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []string{"DescribeExecution", "GetExecutionHistory"} {
		if got, want := counter(t, metrics.APICalls, "stepfunctions", op), float64(srv.Calls(op)); got != want {
			t.Errorf("metric counted %v %s calls, the server received %v", got, op, want)
		}
	}
	d, h := srv.Calls("DescribeExecution"), srv.Calls("GetExecutionHistory")
	if d%perKind != 0 || h%perKind != 0 {
		t.Errorf("%d and %d calls are not shared evenly by %d quiet tenants: another tenant was polled", d, h, perKind)
	}
	return d / perKind, h / perKind
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
		Revision: substate.StepFunctionsRevision(0, substate.RankActive, int64(seq))}
	if sub.Terminal() {
		ev.Revision = substate.StepFunctionsRevision(0, substate.RankTerminal, 0)
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
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| tenant") && !strings.HasPrefix(line, "| ---"):
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
		t.Fatalf("cost table has %d rows, want 3 (terminal, fresh, quiet)", len(rows))
	}
	return rows
}

// TestReconcilerCostMatchesDocs checks the documented API-call cost: the
// formula, the table at the default flags, and what a simulated hour of
// sweeps really sends to Step Functions agree.
func TestReconcilerCostMatchesDocs(t *testing.T) {
	defaults := costSettings{after: consumers.DefaultReconcileAfter, interval: consumers.DefaultReconcileInterval,
		history: consumers.DefaultHistoryInterval, maxEvents: stepfunctions.DefaultMaxHistoryEvents,
		pageSize: stepfunctions.DefaultHistoryPageSize, events: 40}
	table := docCostTable(t)
	naive := int(time.Hour / (10 * time.Second))
	for i, row := range table {
		if row[3] != naive || row[4] != 2*naive {
			t.Errorf("row %d: polling every 10 s = %d and %d, want %d and %d", i, row[3], row[4], naive, 2*naive)
		}
		if row[2] != row[0]+row[1] {
			t.Errorf("row %d: total %d is not %d + %d", i, row[2], row[0], row[1])
		}
	}
	d, h := documentedCost(defaults)
	if quiet := table[2]; quiet[0] != d || quiet[1] != h {
		t.Errorf("documented quiet tenant = %d + %d calls, the formula gives %d + %d", quiet[0], quiet[1], d, h)
	}
	// Only the quiet tenants cost anything: the simulated calls per quiet
	// tenant are the documented row, so the other rows are 0 too.
	if sd, sh := simulatedCost(t, defaults, 3); sd != table[2][0] || sh != table[2][1] {
		t.Errorf("simulated hour: %d + %d calls per quiet tenant, documented %d + %d", sd, sh, table[2][0], table[2][1])
	}
	if table[0][2] != 0 || table[1][2] != 0 {
		t.Errorf("documented terminal and fresh tenants cost %d and %d, want 0", table[0][2], table[1][2])
	}

	// Other settings follow the same formula: polls 120 s apart (100 s
	// rounded up to whole 30 s sweeps), history every 360 s (300 s rounded
	// up to whole polls), three pages a read.
	other := costSettings{after: 100 * time.Second, interval: 30 * time.Second, history: 5 * time.Minute,
		maxEvents: 250, pageSize: 100, events: 300}
	d, h = documentedCost(other)
	if sd, sh := simulatedCost(t, other, 2); sd != d || sh != h {
		t.Errorf("%+v: simulated %d + %d calls, the formula gives %d + %d", other, sd, sh, d, h)
	}
}
