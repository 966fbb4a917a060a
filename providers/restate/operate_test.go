package restate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/operate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// operations is the execution service over a pipeline, with the audit
// stream in place.
func operations(t *testing.T, p *pipelinetest.Pipeline, provider substate.Provider, op substate.ExecutionOperator, poller substate.StatusPoller) *operate.Service {
	t.Helper()
	if err := bus.DefaultTopology().EnsureAuditStream(context.Background(), p.Bus.JetStream); err != nil {
		t.Fatal(err)
	}
	s := &operate.Service{
		Views: p.View, Operators: map[substate.Provider]substate.ExecutionOperator{provider: op},
		Pollers: map[substate.Provider]substate.StatusPoller{}, Raw: p.Pub, Audit: p.Pub,
	}
	if poller != nil {
		s.Pollers[provider] = poller
	}
	return s
}

// act takes an action and fails the test on error.
func act(t *testing.T, s *operate.Service, req substate.ExecutionRequest) substate.ExecutionResult {
	t.Helper()
	if req.Who == "" {
		req.Who = "ops"
	}
	res, err := s.Act(context.Background(), req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Action, req.TenantID, err)
	}
	return res
}

// lastAudit returns the newest audit event of an action on a tenant.
func lastAudit(t *testing.T, p *pipelinetest.Pipeline, action substate.ExecutionAction, tenant string) substate.AuditEvent {
	t.Helper()
	ctx := context.Background()
	stream, err := p.Bus.JetStream.Stream(ctx, substate.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, substate.AuditSubject(action, tenant))
	if err != nil {
		t.Fatalf("audit event of %s %s: %v", action, tenant, err)
	}
	var ev substate.AuditEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// wantAudit checks an action's audit event.
func wantAudit(t *testing.T, p *pipelinetest.Pipeline, res substate.ExecutionResult, outcome string) substate.AuditEvent {
	t.Helper()
	ev := lastAudit(t, p, res.Action, res.TenantID)
	if ev.ID != res.AuditID || ev.Who != res.Who || ev.Reason != res.Reason || ev.Outcome != outcome ||
		ev.ExecutionID != res.ExecutionID || ev.Provider != res.Provider || ev.NewExecutionID != res.NewExecutionID {
		t.Errorf("audit event %+v does not record %+v (%s)", ev, res, outcome)
	}
	return ev
}

// wantStopped checks the view of a stopped execution.
func wantStopped(t *testing.T, p *pipelinetest.Pipeline, tenant, exec, cause string) {
	t.Helper()
	v := p.WaitTenant(t, tenant, "stopped with its cause", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateFailed && strings.Contains(strings.ToLower(v.WorkflowErrorMessage), strings.ToLower(cause))
	})
	if v.WorkflowVerb != substate.VerbCancelled || v.WorkflowExecutionID != exec || !strings.Contains(strings.ToLower(v.WorkflowErrorMessage), strings.ToLower(cause)) {
		t.Fatalf("stopped: view %+v, want failed/cancelled with %q", v, cause)
	}
}

// wantCauseKept checks that the poller's own row of a stopped invocation,
// published after the stop's (same status, no cause), leaves the cause as
// the view's error: the row with the cause ranks above it.
func wantCauseKept(t *testing.T, r *realRestate, id, tenant, cause string) {
	t.Helper()
	row, v := r.observe(t, id, tenant)
	if n := rawRowsOf(t, r.Pipeline, id); n.plain == 0 || n.withCause != 1 {
		t.Fatalf("raw rows of %s: %+v, want the stop's with its cause and the poller's without", id, n)
	}
	if row.Status != "completed" || v.WorkflowErrorMessage != cause || v.WorkflowVerb != substate.VerbCancelled {
		t.Fatalf("after the poller's row %s: view %+v, want the cause %q kept", row, v, cause)
	}
}

// rawRows counts the raw Restate rows stored of one invocation.
type rawRows struct{ plain, withCause int }

func rawRowsOf(t *testing.T, p *pipelinetest.Pipeline, id string) rawRows {
	t.Helper()
	ctx := context.Background()
	c, err := p.Bus.JetStream.OrderedConsumer(ctx, substate.StreamRaw, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{substate.RawSubject(substate.RawRestate)}})
	if err != nil {
		t.Fatal(err)
	}
	var n rawRows
	for {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if !strings.Contains(string(m.Data()), id) || !strings.Contains(string(m.Data()), `"completed"`) {
				continue
			}
			if m.Headers().Get(substate.HeaderStopCause) != "" {
				n.withCause++
			} else {
				n.plain++
			}
		}
		if got == 0 {
			return n
		}
	}
}

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
	s := operations(t, p, substate.ProviderEngine, e, nil)

	info, err := s.Describe(ctx, "t-eng")
	if err != nil || info.Step != "sleep" || info.ExecutionID != "nap-1" || string(info.Input) != `{"n":1}` {
		t.Fatalf("describe %+v %v", info, err)
	}
	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRetry, Who: "ops"}); substate.ErrorCode(err) != substate.ECONFLICT {
		t.Errorf("retry of a running execution: %v", err)
	}
	dry := act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, DryRun: true, Reason: "check"})
	if dry.AuditID != "" || !dry.DryRun {
		t.Errorf("dry run %+v", dry)
	}
	res := act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop, Reason: "wrong plan"})
	wantStopped(t, p, "t-eng", "nap-1", "wrong plan")
	wantAudit(t, p, res, substate.AuditDone)

	res = act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRetry, Reason: "plan fixed"})
	p.WaitTenant(t, "t-eng", "waiting again", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateWaiting && v.WorkflowExecutionID == "nap-1" && v.WorkflowErrorMessage == ""
	})
	wantAudit(t, p, res, substate.AuditDone)

	act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionStop})
	wantStopped(t, p, "t-eng", "nap-1", "stopped by ops")
	res = act(t, s, substate.ExecutionRequest{TenantID: "t-eng", Action: substate.ActionRestart, Who: "loopback"})
	p.WaitTenant(t, "t-eng", "restarted", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateWaiting && v.WorkflowExecutionID == res.NewExecutionID
	})
	if ev := wantAudit(t, p, res, substate.AuditDone); ev.Who != "loopback" || ev.NewExecutionID == "" {
		t.Errorf("restart audit %+v", ev)
	}
}

// TestOperateStepFunctions: stop, redrive, a redrive refused for a missing
// permission and a restart, against the fake Step Functions through the
// real SDK; the view after each and the audit events.
func TestOperateStepFunctions(t *testing.T) {
	ctx := context.Background()
	srv := awstest.New(t)
	sfn := stepfunctions.New(srv.Config())
	sfn.AccountID, sfn.RoleARN = awstest.AccountID, "arn:aws:iam::123456789012:role/substate-sfn"
	machine, err := sfn.EnsureWorkflow(ctx, engine.Workflow{Name: "orders", Definition: []byte(`{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	x, err := sfn.Start(ctx, engine.StartRequest{Workflow: machine, Name: "order-1", TenantID: "t-sfn", Input: json.RawMessage(`{"orderId":"o-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := pipelinetest.New(t)
	raw, err := sfn.Poll(ctx, x.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, raw)
	p.WaitTenant(t, "t-sfn", "running", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	s := operations(t, p, substate.ProviderStepFunctions, sfn, sfn)

	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Kill: true, Who: "ops"}); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("kill on Step Functions: %v", err)
	}
	res := act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Reason: "customer left"})
	wantStopped(t, p, "t-sfn", x.ID, "customer left")
	wantAudit(t, p, res, substate.AuditDone)
	if _, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionStop, Who: "ops"}); substate.ErrorCode(err) != substate.ECONFLICT || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("second stop: %v", err)
	}

	res = act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRetry, Reason: "customer back"})
	p.WaitTenant(t, "t-sfn", "redriven", func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateRunning })
	wantAudit(t, p, res, substate.AuditDone)
	if e, _ := srv.Execution(x.ID); e.RedriveCount != 1 || e.Status != "RUNNING" {
		t.Fatalf("after retry %+v", e)
	}

	if err := srv.SetStatus(x.ID, "FAILED", "Boom", "card declined"); err != nil {
		t.Fatal(err)
	}
	srv.Deny("RedriveExecution", 1)
	_, err = s.Act(ctx, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRetry, Who: "ops"})
	if substate.ErrorCode(err) != substate.EFORBIDDEN || !strings.Contains(err.Error(), "states:RedriveExecution") {
		t.Fatalf("denied redrive: %v", err)
	}
	if ev := lastAudit(t, p, substate.ActionRetry, "t-sfn"); ev.Outcome != substate.AuditRefused || !strings.Contains(ev.Error, "states:RedriveExecution") {
		t.Errorf("refused redrive audit %+v", ev)
	}

	res = act(t, s, substate.ExecutionRequest{TenantID: "t-sfn", Action: substate.ActionRestart, Reason: "start over"})
	p.WaitTenant(t, "t-sfn", "restarted", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateRunning && v.WorkflowExecutionID == res.NewExecutionID
	})
	wantAudit(t, p, res, substate.AuditDone)
}

// TestOperateRestate: resume a paused invocation, cancel and kill others,
// on a real Restate server; the view after each and the audit events.
func TestOperateRestate(t *testing.T) {
	ctx := context.Background()
	r := newRealRestate(t)
	rs := r.rs
	op := &restate.Operator{Admin: r.poller.Admin}
	s := operations(t, r.Pipeline, substate.ProviderRestate, op, op)
	completed := func(s rowState) bool { return s.Status == "completed" }

	t.Run("ResumePaused", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-stuck", "stuck", nil, 0)
		r.follow(t, id, "t-op-stuck", func(s rowState) bool { return s.Status == "paused" })
		info, err := s.Describe(ctx, "t-op-stuck")
		if err != nil || !info.Retryable || info.ProviderState != "paused" || info.Step != "stuck" || info.Ended {
			t.Fatalf("describe paused: %+v %v", info, err)
		}
		rs.Gate(t, "t-op-stuck", "open")
		res := act(t, s, substate.ExecutionRequest{TenantID: "t-op-stuck", Action: substate.ActionRetry, Reason: "downstream fixed"})
		wantAudit(t, r.Pipeline, res, substate.AuditDone)
		r.follow(t, id, "t-op-stuck", completed)
		if v := r.Tenant(t, "t-op-stuck"); v.WorkflowSubState != substate.StateSucceeded {
			t.Fatalf("after resume: %+v", v)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-nap", "nap", nil, 0)
		r.follow(t, id, "t-op-nap", func(s rowState) bool { return s.Status == "suspended" })
		res := act(t, s, substate.ExecutionRequest{TenantID: "t-op-nap", Action: substate.ActionStop, Reason: "not needed"})
		wantAudit(t, r.Pipeline, res, substate.AuditDone)
		// The stop returns once Restate completed the invocation, and its
		// cause is the view's error (Restate keeps none).
		wantStopped(t, r.Pipeline, "t-op-nap", id, "not needed")
		wantCauseKept(t, r, id, "t-op-nap", "not needed")
		_, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-op-nap", Action: substate.ActionStop, Who: "ops"})
		if substate.ErrorCode(err) != substate.ECONFLICT {
			t.Errorf("stop of a completed invocation: %v", err)
		}
	})
	t.Run("Kill", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-kill", "nap", nil, 0)
		r.follow(t, id, "t-op-kill", func(s rowState) bool { return s.Status == "suspended" })
		res := act(t, s, substate.ExecutionRequest{TenantID: "t-op-kill", Action: substate.ActionStop, Kill: true, Reason: "stuck for good"})
		if ev := wantAudit(t, r.Pipeline, res, substate.AuditDone); !ev.Kill {
			t.Errorf("kill audit %+v", ev)
		}
		wantStopped(t, r.Pipeline, "t-op-kill", id, "stuck for good")
		wantCauseKept(t, r, id, "t-op-kill", "stuck for good")
	})
	t.Run("RestartAsNew", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-again", "terminal", nil, 0)
		r.follow(t, id, "t-op-again", completed)
		res := act(t, s, substate.ExecutionRequest{TenantID: "t-op-again", Action: substate.ActionRestart, Reason: "card replaced"})
		if res.NewExecutionID == "" || res.NewExecutionID == id {
			t.Fatalf("restart %+v", res)
		}
		wantAudit(t, r.Pipeline, res, substate.AuditDone)
		r.follow(t, res.NewExecutionID, "t-op-again", completed)
		if v := r.Tenant(t, "t-op-again"); v.WorkflowExecutionID != res.NewExecutionID {
			t.Fatalf("view after the restart %+v", v)
		}
	})
	t.Run("RestartRefusedWhileRunning", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-run", "nap", nil, 0)
		r.follow(t, id, "t-op-run", func(s rowState) bool { return s.Status == "suspended" })
		_, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-op-run", Action: substate.ActionRestart, Who: "ops"})
		if substate.ErrorCode(err) != substate.ECONFLICT || !strings.Contains(err.Error(), "stop it") {
			t.Errorf("restart of a running invocation: %v", err)
		}
	})
}
