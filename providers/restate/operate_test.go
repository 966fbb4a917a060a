package restate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/operatortest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// wantCauseKept checks that the poller's own row of a stopped invocation,
// published after the stop's (same status, no cause), leaves the cause as
// the view's error: the row with the cause ranks above it.
func wantCauseKept(t *testing.T, r *realRestate, id, tenant, cause string) {
	t.Helper()
	row, v := r.observe(t, id, tenant)
	if n := rawRowsOf(t, r.Pipeline, id); n.plain == 0 || n.withCause != 1 {
		t.Fatalf("raw rows of %s: %+v, want the stop's with its cause and the poller's without", id, n)
	}
	if row.Status != "completed" || v.WorkflowErrorMessage != substate.StopMessage(cause) || v.WorkflowVerb != substate.VerbCancelled {
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

// TestOperateRestate: resume a paused invocation, cancel and kill others,
// on a real Restate server; the view after each and the audit events.
func TestOperateRestate(t *testing.T) {
	ctx := context.Background()
	r := newRealRestate(t)
	rs := r.rs
	op := &restate.Operator{Admin: r.poller.Admin}
	s := operatortest.Service(t, r.Pipeline, substate.ProviderRestate, op, op, restate.Rules())
	completed := func(s rowState) bool { return s.Status == "completed" }

	t.Run("ResumePaused", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-stuck", "stuck", nil, 0)
		r.follow(t, id, "t-op-stuck", func(s rowState) bool { return s.Status == "paused" })
		info, err := s.Describe(ctx, "t-op-stuck")
		if err != nil || !info.Retryable || info.ProviderState != "paused" || info.Step != "stuck" || info.Ended {
			t.Fatalf("describe paused: %+v %v", info, err)
		}
		rs.Gate(t, "t-op-stuck", "open")
		res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-op-stuck", Action: substate.ActionRetry, Reason: "downstream fixed"})
		operatortest.WantAudit(t, r.Pipeline, res, substate.AuditDone)
		r.follow(t, id, "t-op-stuck", completed)
		if v := r.Tenant(t, "t-op-stuck"); v.WorkflowSubState != substate.StateSucceeded {
			t.Fatalf("after resume: %+v", v)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-nap", "nap", nil, 0)
		r.follow(t, id, "t-op-nap", func(s rowState) bool { return s.Status == "suspended" })
		res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-op-nap", Action: substate.ActionStop, Reason: "not needed"})
		operatortest.WantAudit(t, r.Pipeline, res, substate.AuditDone)
		// The stop returns once Restate completed the invocation, and its
		// cause is the view's error (Restate keeps none).
		operatortest.WantStopped(t, r.Pipeline, "t-op-nap", id, "not needed")
		wantCauseKept(t, r, id, "t-op-nap", "not needed")
		if info, err := s.Describe(ctx, "t-op-nap"); err != nil || !info.Stopped || info.Killed {
			t.Errorf("describe cancelled: %+v, %v; want stopped, not killed", info, err)
		}
		_, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-op-nap", Action: substate.ActionStop, Who: "ops"})
		if substate.ErrorCode(err) != substate.ECONFLICT {
			t.Errorf("stop of a completed invocation: %v", err)
		}
	})
	t.Run("Kill", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-kill", "nap", nil, 0)
		r.follow(t, id, "t-op-kill", func(s rowState) bool { return s.Status == "suspended" })
		res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-op-kill", Action: substate.ActionStop, Kill: true, Reason: "stuck for good"})
		if ev := operatortest.WantAudit(t, r.Pipeline, res, substate.AuditDone); !ev.Kill {
			t.Errorf("kill audit %+v", ev)
		}
		operatortest.WantStopped(t, r.Pipeline, "t-op-kill", id, "stuck for good")
		wantCauseKept(t, r, id, "t-op-kill", "stuck for good")
		if info, err := s.Describe(ctx, "t-op-kill"); err != nil || !info.Stopped || !info.Killed {
			t.Errorf("describe killed: %+v, %v; want stopped and killed", info, err)
		}
	})
	t.Run("CancelBackingOff", func(t *testing.T) {
		// Restate takes the cancel (202) but delivers it when the handler
		// next runs, a minute away, and this handler fails before it reads
		// its context: the stop is pending, never done, until the kill;
		// its follow-up then records that the cancel changed nothing.
		id := rs.Send(t, "Provision", "t-op-backoff", "backoff", nil, 0)
		r.follow(t, id, "t-op-backoff", func(s rowState) bool { return s.Status == "backing-off" && s.RetryCount == 2 })
		s.Settle, s.Every = 2*time.Second, 200*time.Millisecond
		res, err := s.Act(ctx, substate.ExecutionRequest{TenantID: "t-op-backoff", Action: substate.ActionStop, Reason: "customer left", Who: "ops"})
		if err != nil || res.Outcome != substate.AuditPending || !strings.Contains(res.Next, "--kill") {
			t.Fatalf("cancel of a backing-off invocation: %+v, %v; want pending, naming --kill", res, err)
		}
		operatortest.WantAudit(t, r.Pipeline, res, substate.AuditPending)
		if row := rowStateOf(rs.Row(t, id)); row.Status != "backing-off" {
			t.Fatalf("the cancel had an effect after all: %s; the test no longer shows a pending stop", row)
		}
		kill := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-op-backoff", Action: substate.ActionStop, Kill: true, Reason: "customer left"})
		if ev := auditEvent(t, r, "t-op-backoff", func(ev substate.AuditEvent) bool { return ev.ID == kill.AuditID }); ev.Outcome != substate.AuditDone || !ev.Kill {
			t.Errorf("kill audit %+v, want done", ev)
		}
		operatortest.WantStopped(t, r.Pipeline, "t-op-backoff", id, "customer left")
		ev := auditEvent(t, r, "t-op-backoff", func(ev substate.AuditEvent) bool { return ev.Settles == res.AuditID })
		if ev.Outcome != substate.AuditRefused || ev.ErrorCode != substate.ECONFLICT || !strings.Contains(ev.Error, "killed before the cancel") {
			t.Errorf("follow-up of the cancel %+v: want refused, the kill ended the invocation", ev)
		}
	})
	t.Run("RestartAsNew", func(t *testing.T) {
		id := rs.Send(t, "Provision", "t-op-again", "terminal", nil, 0)
		r.follow(t, id, "t-op-again", completed)
		res := operatortest.Act(t, s, substate.ExecutionRequest{TenantID: "t-op-again", Action: substate.ActionRestart, Reason: "card replaced"})
		if res.NewExecutionID == "" || res.NewExecutionID == id {
			t.Fatalf("restart %+v", res)
		}
		operatortest.WantAudit(t, r.Pipeline, res, substate.AuditDone)
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

// auditEvent waits up to 30 s for the tenant's stop audit event that ok
// accepts, and returns it.
func auditEvent(t *testing.T, r *realRestate, tenant string, ok func(substate.AuditEvent) bool) substate.AuditEvent {
	t.Helper()
	subject := substate.AuditSubject(substate.ActionStop, tenant)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, m := range bustest.Msgs(t, r.Bus.JetStream, substate.StreamAudit) {
			var ev substate.AuditEvent
			if m.Subject == subject && json.Unmarshal(m.Data, &ev) == nil && ok(ev) {
				return ev
			}
		}
	}
	t.Fatalf("no such stop audit event of %s within 30 s", tenant)
	return substate.AuditEvent{}
}
