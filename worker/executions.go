package worker

import (
	"context"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/operate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/publishers"
)

// executions returns the service that describes and acts on tenants'
// executions, over the providers this worker can reach: the engine (in this
// process, or through its control endpoints), Step Functions when an AWS region is configured,
// Restate when its admin URL is set. It needs the view; a worker without
// one has none (nil), and serves no execution routes.
func (w *Worker) executions(ctx context.Context) (substate.ExecutionService, error) {
	if w.View == nil {
		return nil, nil
	}
	if err := w.Flags.Topology().EnsureAuditStream(ctx, w.Bus.JetStream); err != nil {
		return nil, err
	}
	pub := publishers.NewJetStream(w.Bus.JetStream)
	svc := &operate.Service{
		Views: w.View, Operators: map[substate.Provider]substate.ExecutionOperator{},
		Pollers: map[substate.Provider]substate.StatusPoller{}, Raw: pub, Audit: pub,
		Rules: w.Flags.providerRules(), Hints: operatorHints, Logger: w.Logger.With("component", "executions"),
	}
	w.closers = append(w.closers, svc.Close)
	if w.Engine != nil {
		svc.Operators[substate.ProviderEngine] = w.Engine
	} else { // --role project: the engine runs in another process
		svc.Operators[substate.ProviderEngine] = &engine.RemoteOperator{Conn: w.Bus.Conn}
	}
	if p := w.reconcile.sfnActor; p != nil { // outside the poller's budget
		svc.Operators[substate.ProviderStepFunctions], svc.Pollers[substate.ProviderStepFunctions] = p, p
	}
	if admin := w.reconcile.restateAdmin; admin != nil {
		op := &restate.Operator{Admin: admin}
		svc.Operators[substate.ProviderRestate], svc.Pollers[substate.ProviderRestate] = op, op
	}
	if err := w.openJobs(ctx, svc.Operators, svc.Pollers); err != nil {
		return nil, err
	}
	return svc, nil
}

// operatorHints say which flags configure each provider's operator, for
// the error of an action on a tenant whose provider this worker has none
// for.
var operatorHints = map[substate.Provider]string{
	substate.ProviderStepFunctions: "configure an AWS region (--aws-region or AWS_REGION)",
	substate.ProviderRestate:       "set --restate-admin-url",
}
