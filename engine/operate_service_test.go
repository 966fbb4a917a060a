package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/operatortest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestOperateEngine: stop, retry and restart an engine execution through
// the service; the view after each and the audit events.
func TestOperateEngine(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.ServeControl, e.Logger = p.Bus.Conn, p.Pub, false, slog.New(slog.DiscardHandler)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ref, err := e.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte(`
name: nap
version: "1"
startAt: sleep
states:
  sleep: {type: Wait, seconds: 3600, next: done}
  done: {type: Success}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, engine.StartRequest{Workflow: ref, Name: "nap-1", TenantID: "t-eng", Input: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	p.WaitTenant(t, "t-eng", "waiting", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateWaiting })
	s := operatortest.Service(t, p, substate.ProviderEngine, e, nil, substate.ProviderRules{})

	info, err := s.Describe(ctx, "t-eng")
	if err != nil || info.Step != "sleep" || info.ExecutionID != "nap-1" || string(info.Input) != `{"n":1}` {
		t.Fatalf("describe %+v %v", info, err)
	}
	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRetry, Who: "ops"}); substate.ErrorCode(err) != substate.ECONFLICT {
		t.Errorf("retry of a running execution: %v", err)
	}
	dry := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, DryRun: true, Reason: "check"})
	if dry.AuditID != "" || !dry.DryRun {
		t.Errorf("dry run %+v", dry)
	}
	res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, Reason: "wrong plan"})
	operatortest.WantStopped(t, p, "t-eng", "nap-1", "wrong plan")
	operatortest.WantAudit(t, p, res, substate.AuditDone)

	res = operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRetry, Reason: "plan fixed"})
	p.WaitTenant(t, "t-eng", "waiting again", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateWaiting && v.WorkflowExecutionID == "nap-1" && v.WorkflowErrorMessage == ""
	})
	operatortest.WantAudit(t, p, res, substate.AuditDone)

	operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop})
	operatortest.WantStopped(t, p, "t-eng", "nap-1", "stopped by ops")
	res = operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRestart, Who: "loopback"})
	p.WaitTenant(t, "t-eng", "restarted", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateWaiting && v.WorkflowExecutionID == res.NewExecutionID
	})
	if ev := operatortest.WantAudit(t, p, res, substate.AuditDone); ev.Who != "loopback" || ev.NewExecutionID == "" {
		t.Errorf("restart audit %+v", ev)
	}

	// A stop confirmed on what the operator saw before the restart (the
	// console's preview, describe's id) reaches no execution: the
	// tenant's is the new one now, so it is skipped and recorded so.
	stale := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, ExecutionID: "nap-1", Reason: "old page"})
	if stale.Outcome != substate.AuditSkipped || !strings.Contains(stale.Next, res.NewExecutionID) {
		t.Errorf("stop of the execution before the restart: %+v", stale)
	}
	operatortest.WantAudit(t, p, stale, substate.AuditSkipped)
	if info, err := s.Describe(ctx, "t-eng"); err != nil || info.ExecutionID != res.NewExecutionID || info.Ended {
		t.Errorf("after the skipped stop the new execution is %+v, %v; want it still running", info, err)
	}
	ok := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, ExecutionID: res.NewExecutionID, Reason: "current page"})
	if ok.Outcome != substate.AuditDone {
		t.Errorf("stop of the execution the caller saw: %+v", ok)
	}
	operatortest.WantStopped(t, p, "t-eng", res.NewExecutionID, "current page")
}

// TestDescribeSucceededEngine: after an engine execution succeeded, the
// view keeps no execution id, and describe still answers with the
// execution and its output (the routes redact it below admin).
func TestDescribeSucceededEngine(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.ServeControl, e.Logger = p.Bus.Conn, p.Pub, false, slog.New(slog.DiscardHandler)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ref, err := e.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte(`
name: quick
version: "1"
startAt: done
states:
  done: {type: Success}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, engine.StartRequest{Workflow: ref, Name: "quick-1", TenantID: "t-done", Input: json.RawMessage(`{"plan":"gold"}`)}); err != nil {
		t.Fatal(err)
	}
	v := p.WaitTenant(t, "t-done", "succeeded", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateSucceeded })
	if v.WorkflowExecutionID != "" {
		t.Fatalf("view %+v keeps the succeeded execution's id", v)
	}
	s := operatortest.Service(t, p, substate.ProviderEngine, e, nil, substate.ProviderRules{})
	info, err := s.Describe(ctx, "t-done")
	if err != nil || info.ExecutionID != "quick-1" || info.ProviderState != substate.EngineSucceeded || string(info.Output) != `{"plan":"gold"}` || info.TenantID != "t-done" {
		t.Fatalf("describe %+v %v; want the succeeded execution with its output", info, err)
	}
	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-done", Action: substate.ActionRetry, Who: "ops"}); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("retry of a succeeded tenant: %v, want not found (actions follow the view)", err)
	}
}

// TestRestartIdempotencyKey: a restart asked twice with the same
// idempotency key starts one execution.
func TestRestartIdempotencyKey(t *testing.T) {
	p := pipelinetest.New(t)
	e := engine.NewEngine(filepath.Join(t.TempDir(), "engine.db"))
	e.Conn, e.Publisher, e.ServeControl, e.Logger = p.Bus.Conn, p.Pub, false, slog.New(slog.DiscardHandler)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	ref, err := e.EnsureWorkflow(ctx, engine.Workflow{Definition: []byte("name: boom\nversion: \"1\"\nstartAt: boom\nstates:\n  boom: {type: Fail, error: Boom, cause: it broke}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, engine.StartRequest{Workflow: ref, Name: "b-1", TenantID: "t-1", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	keyed := substate.WithIdempotencyKey(ctx, "job-1/t-1/b-1")
	first, err := e.RestartExecution(keyed, "b-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.RestartExecution(keyed, "b-1")
	if err != nil || again != first {
		t.Errorf("asked again: %q %v, want %q", again, err, first)
	}
	if other, err := e.RestartExecution(ctx, "b-1"); err != nil || other == first {
		t.Errorf("without a key: %q %v", other, err)
	}
}
