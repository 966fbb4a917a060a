package actions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/actions"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// flakyWorkflow calls a task that fails while the fleet's switch is off.
const flakyWorkflow = "name: flaky\nversion: \"1\"\nstartAt: call\nstates:\n  call: {type: Task, resource: fleet.flaky, next: done}\n  done: {type: Success}\n"

// fleet is a pipeline with the engine, a task service that fails until
// fixed, and the job service and runner over them.
type fleet struct {
	p      *pipelinetest.Pipeline
	eng    *engine.Engine
	ref    string
	fixed  atomic.Bool
	svc    *actions.Service
	runner *actions.Runner
	ops    map[substate.Provider]substate.ExecutionOperator
	rules  map[substate.Provider]substate.ProviderRules
	limits map[string]actions.Limits
	// throttle is the runner's backoff after throttling.
	throttle timex.Backoff
	// retry is the runner's backoff after no answer.
	retry timex.Backoff
	// requeue is the runner's RequeueFunc.
	requeue actions.RequeueFunc
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{p: pipelinetest.New(t), rules: map[substate.Provider]substate.ProviderRules{
		substate.ProviderStepFunctions: stepfunctions.Rules(""), substate.ProviderRestate: restate.Rules(),
	}}
	f.limits = actions.DefaultLimits(f.rules)
	ctx := context.Background()
	if err := bus.DefaultTopology().EnsureAuditStream(ctx, f.p.Bus.JetStream); err != nil {
		t.Fatal(err)
	}
	taskService(t, bustest.Connect(t, f.p.Bus, bus.Tasks), func(req micro.Request) {
		if !f.fixed.Load() {
			_ = req.Error("Closed", "the payment provider returned HTTP 503", nil)
			return
		}
		_ = req.Respond(req.Data())
	})
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.ServeControl, e.Logger = f.p.Bus.Conn, f.p.Pub, false, slog.New(slog.DiscardHandler)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ref, err := e.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte(flakyWorkflow)})
	if err != nil {
		t.Fatal(err)
	}
	f.eng, f.ref = e, ref
	f.ops = map[substate.Provider]substate.ExecutionOperator{substate.ProviderEngine: e}
	return f
}

// taskService answers fleet.flaky with h.
func taskService(t *testing.T, nc *nats.Conn, h micro.HandlerFunc) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "fleet", Version: "1.0.0"})
	if err == nil {
		err = svc.AddEndpoint("flaky", h, micro.WithEndpointSubject(substate.TaskSubject("fleet", "flaky")))
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// testLogger logs to the test's log with -v and SUBSTATE_TEST_LOG set.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("SUBSTATE_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// start starts the runner and the service (again, after stop).
func (f *fleet) start(t *testing.T) {
	t.Helper()
	f.runner = &actions.Runner{JS: f.p.Bus.JetStream, Views: f.p.View, Operators: f.ops, Raw: f.p.Pub, Audit: f.p.Pub,
		Rules: f.rules, Limits: f.limits, AckWait: 2 * time.Second, Settle: 2 * time.Second, Watch: 5 * time.Second, Worker: "test",
		Throttle: f.throttle, Retry: f.retry, Requeue: f.requeue, Logger: testLogger(t)}
	if err := f.runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.runner.Close() })
	f.svc = &actions.Service{JS: f.p.Bus.JetStream, Views: f.p.View, Rules: f.rules, Limits: f.limits,
		Lanes: []string{string(substate.ProviderEngine), substate.LaneDeadLetters}}
}

// failTenants starts n executions that fail, tenants prefix-0…, and
// waits until the view shows them all failed.
func (f *fleet) failTenants(t *testing.T, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		tenant := fmt.Sprintf("%s%04d", prefix, i)
		if _, err := f.eng.Start(ctx, engine.StartRequest{Workflow: f.ref, Name: "x-" + tenant, TenantID: tenant,
			Input: json.RawMessage(`{"tenantId":"` + tenant + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	pipelinetest.WaitFor(t, "the executions to fail", func() bool {
		sel, err := f.p.View.Select(ctx, substate.TenantFilter{TenantPrefix: prefix, SubState: substate.StateFailed}, 1_000_000)
		return err == nil && len(sel.Tenants) == n
	})
}

// request is a job request by ops on tenants the filter selects.
func request(action substate.ExecutionAction, filter substate.TenantFilter) substate.JobRequest {
	return substate.JobRequest{Action: action, Tenants: filter, Filter: map[string]string{"tenantPrefix": filter.TenantPrefix},
		Reason: "incident 42", Who: "ops"}
}

// waitJob waits until the job is final and returns it.
func (f *fleet) waitJob(t *testing.T, id string, within time.Duration) substate.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := f.svc.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Final() {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not done after %s: %+v", id, within, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// auditOutcomes reads SUBSTATE_AUDIT directly: each member's last
// outcome under the job.
func (f *fleet) auditOutcomes(t *testing.T, job string) map[int]string {
	t.Helper()
	out := map[int]string{}
	r := &replay.Reader{JS: f.p.Bus.JetStream}
	for m, err := range r.Messages(context.Background(), substate.StreamAudit, "", replay.Range{}) {
		if err != nil {
			t.Fatal(err)
		}
		var ev substate.AuditEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Job == job {
			out[ev.Member] = ev.Outcome
		}
	}
	return out
}

// reportOutcomes reads the job's whole report.
func (f *fleet) reportOutcomes(t *testing.T, job string) map[int]string {
	t.Helper()
	out := map[int]string{}
	q := substate.JobReportQuery{Limit: 100}
	for {
		rep, err := f.svc.Report(context.Background(), job, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Members {
			out[m.Member] = m.Outcome
		}
		if rep.NextAfter == 0 {
			return out
		}
		q.After = rep.NextAfter
	}
}

// redrives returns how many times the engine retried each execution of
// tenants prefix-0… to prefix-(n-1): what a job did, read from the
// provider's own record (the task's calls trail its retry).
func (f *fleet) redrives(t *testing.T, prefix string, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range n {
		info, err := f.eng.DescribeExecution(context.Background(), fmt.Sprintf("x-%s%04d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = info.Redrives
	}
	return out
}

// sum adds up counts.
func sum(counts []int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
