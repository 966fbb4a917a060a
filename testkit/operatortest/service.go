package operatortest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/operate"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// The helpers below drive an operator the way a worker does, through the
// operate.Service over a pipeline, for a provider's tests of what the view
// and the audit stream show after each action.

// Service returns the execution service over a pipeline with one
// provider's operator (and its poller, when it has one) and its rules, as
// the worker wires them, the audit stream in place.
func Service(t *testing.T, p *pipelinetest.Pipeline, provider substate.Provider, op substate.ExecutionOperator, poller substate.StatusPoller, rules substate.ProviderRules) *operate.Service {
	t.Helper()
	if err := bus.DefaultTopology().EnsureAuditStream(context.Background(), p.Bus.JetStream); err != nil {
		t.Fatal(err)
	}
	s := &operate.Service{
		Views: p.View, Operators: map[substate.Provider]substate.ExecutionOperator{provider: op},
		Pollers: map[substate.Provider]substate.StatusPoller{}, Raw: p.Pub, Audit: p.Pub,
		Rules: map[substate.Provider]substate.ProviderRules{provider: rules},
	}
	if poller != nil {
		s.Pollers[provider] = poller
	}
	return s
}

// Act takes an action (by "ops" unless the request says who) and fails the
// test on error.
func Act(t *testing.T, s *operate.Service, req substate.ExecutionRequest) substate.ExecutionResult {
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

// LastAudit returns the newest audit event of an action on a tenant.
func LastAudit(t *testing.T, p *pipelinetest.Pipeline, action substate.ExecutionAction, tenant string) substate.AuditEvent {
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

// WantAudit checks that an action's audit event records it, with the
// outcome, and returns the event.
func WantAudit(t *testing.T, p *pipelinetest.Pipeline, res substate.ExecutionResult, outcome string) substate.AuditEvent {
	t.Helper()
	ev := LastAudit(t, p, res.Action, res.TenantID)
	if ev.ID != res.AuditID || ev.Who != res.Who || ev.Reason != res.Reason || ev.Outcome != outcome ||
		ev.ExecutionID != res.ExecutionID || ev.Provider != res.Provider || ev.NewExecutionID != res.NewExecutionID {
		t.Errorf("audit event %+v does not record %+v (%s)", ev, res, outcome)
	}
	return ev
}

// WantStopped waits until the tenant's view shows its execution stopped:
// failed, cancelled, with the cause as its error.
func WantStopped(t *testing.T, p *pipelinetest.Pipeline, tenant, exec, cause string) {
	t.Helper()
	has := func(v substate.TenantView) bool {
		return strings.Contains(strings.ToLower(v.WorkflowErrorMessage), strings.ToLower(cause))
	}
	v := p.WaitTenant(t, tenant, "stopped with its cause", func(v substate.TenantView) bool {
		return v.WorkflowSubState == substate.StateFailed && has(v)
	})
	if v.WorkflowVerb != substate.VerbCancelled || v.WorkflowExecutionID != exec {
		t.Fatalf("stopped: view %+v, want failed/cancelled with %q", v, cause)
	}
}

// auditLog keeps the audit events of the contract's own service.
type auditLog struct {
	mu     sync.Mutex
	events []substate.AuditEvent
}

func (a *auditLog) PublishAudit(_ context.Context, ev substate.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

// last returns the newest audit event.
func (a *auditLog) last(t *testing.T) substate.AuditEvent {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		t.Fatal("no audit event")
	}
	return a.events[len(a.events)-1]
}

// oneTenant is a view of one tenant, "contract", whose execution is id.
type oneTenant struct {
	provider substate.Provider
	id       string
}

func (v oneTenant) Tenant(_ context.Context, tenant string) (substate.TenantView, error) {
	if tenant != "contract" {
		return substate.TenantView{}, substate.Errorf(substate.ENOTFOUND, "tenant %q not found", tenant)
	}
	return substate.TenantView{TenantID: tenant, Provider: v.provider, WorkflowExecutionID: v.id, WorkflowSubState: substate.StateRunning}, nil
}

// service returns an operate.Service over the operator under test whose
// one tenant, "contract", runs the execution id.
func (s *suite) service(id string) (*operate.Service, *auditLog) {
	a := &auditLog{}
	return &operate.Service{
		Views:     oneTenant{provider: s.f.Provider, id: id},
		Operators: map[substate.Provider]substate.ExecutionOperator{s.f.Provider: s.p.Operator},
		Rules:     map[substate.Provider]substate.ProviderRules{s.f.Provider: s.p.Rules},
		Audit:     a,
	}, a
}
