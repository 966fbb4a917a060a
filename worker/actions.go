package worker

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/actions"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/publishers"
)

// ActionFlags configure the fleet jobs a worker runs.
type ActionFlags struct {
	ActionJobs  int      `name:"action-jobs" default:"4" help:"Fleet jobs (substate executions retry --filter …) this worker runs at once; more wait their turn (a paused job keeps its place)."`
	ActionLimit []string `name:"action-limit" placeholder:"LIMIT" help:"A fleet job lane's limit, repeatable: LANE=N sets how many members it acts on at once, LANE/API=BUCKET/RATE a provider API's token bucket (such as stepfunctions/RedriveExecution=500/25). Lanes: stepfunctions, restate, engine, deadletters. Defaults: Step Functions' documented quotas for the region, see docs/actions.md."`
}

// providerRules are the rules of every provider a worker may act on,
// from the providers' packages: Step Functions' for the AWS region.
func (f Flags) providerRules() map[substate.Provider]substate.ProviderRules {
	region := f.AWSRegion
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	return map[substate.Provider]substate.ProviderRules{
		substate.ProviderStepFunctions: stepfunctions.Rules(region),
		substate.ProviderRestate:       restate.Rules(),
	}
}

// actionLimits returns each lane's limits: the defaults of the providers'
// rules, with the flags' settings applied.
func (f Flags) actionLimits(rules map[substate.Provider]substate.ProviderRules) (map[string]actions.Limits, error) {
	limits := actions.DefaultLimits(rules)
	for _, s := range f.ActionLimit {
		if err := actions.ParseLimit(limits, s); err != nil {
			return nil, substate.Errorf(substate.EINVALID, "--%s", err)
		}
	}
	return limits, nil
}

// openJobs builds the fleet jobs' service, which the HTTP API serves, and
// the runner that runs them on this worker, acting with the operators
// the execution service has.
func (w *Worker) openJobs(ctx context.Context, ops map[substate.Provider]substate.ExecutionOperator, pollers map[substate.Provider]substate.StatusPoller) error {
	rules := w.Flags.providerRules()
	limits, err := w.Flags.actionLimits(rules)
	if err != nil {
		return err
	}
	pub := publishers.NewJetStream(w.Bus.JetStream)
	lanes := []string{substate.LaneDeadLetters}
	for p := range ops {
		lanes = append(lanes, string(p))
	}
	slices.Sort(lanes)
	r := &actions.Runner{
		JS: w.Bus.JetStream, Views: w.View, Operators: ops, Pollers: pollers, Raw: pub, Audit: pub,
		Requeue: w.RequeueRaw, Rules: rules, Hints: operatorHints, Limits: limits, AckWait: w.Flags.AckWait, MaxJobs: w.Flags.ActionJobs,
		Replicas: w.Flags.NATSReplicas, Worker: w.workerName(), Logger: w.Logger.With("component", "actions"),
	}
	if err := r.Open(ctx); err != nil {
		return fmt.Errorf("open fleet jobs: %w", err)
	}
	w.closers = append(w.closers, r.Close)
	svc := &actions.Service{JS: w.Bus.JetStream, Views: w.View, Lanes: lanes, Rules: rules, Limits: limits,
		Preflight: map[string]actions.Preflight{}, Logger: w.Logger.With("component", "actions")}
	if p := w.reconcile.sfn; p != nil {
		svc.Preflight[string(substate.ProviderStepFunctions)] = p.ActionPreflight
	}
	w.jobs = svc
	return nil
}

// workerName names this worker in the jobs it runs: its host and
// instance.
func (w *Worker) workerName() string {
	host, _ := os.Hostname()
	if w.Flags.Instance != "" {
		return host + "/" + w.Flags.Instance
	}
	return host
}
