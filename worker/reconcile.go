package worker

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/publishers"
	recon "github.com/substatehq/substate/reconcile"
)

// ReconcileFlags configure the reconciler, which asks providers about
// tenants nothing was heard of for a while, and the Restate admin poller.
type ReconcileFlags struct {
	ReconcileAfter     time.Duration `name:"reconcile-after" default:"0s" help:"Poll only the running executions nothing was heard of for this long (0 = every running execution)."`
	ReconcileInterval  time.Duration `name:"reconcile-interval" default:"15s" help:"The longest wait between two reconciler sweeps (a sweep also starts when an execution's poll is due)."`
	ReconcileQPS       float64       `name:"reconcile-qps" default:"10" help:"Restate admin queries per second the poller may send (0 = no limit)."`
	SFNReconcile       string        `name:"sfn-reconcile" enum:"auto,on,off" default:"auto" help:"Poll Step Functions running executions: auto when an AWS region is configured, on (fail without one), off."`
	SFNHistoryInterval time.Duration `name:"sfn-history-interval" default:"15s" help:"How often each running Step Functions execution's history is read (only its new events), so retries and backing-off show within this interval."`
	SFNAPIBudget       float64       `name:"sfn-api-budget" default:"4" help:"Step Functions API calls per second the poller may spend (the account's quotas are shared with every other caller); past it, polls are spread evenly and lag (0 = no limit)."`
	SFNRedriveCheck    time.Duration `name:"sfn-redrive-check-interval" default:"1h" help:"How often each failed Step Functions execution is checked (one DescribeExecution) for a redrive done outside substate, during the 14 days it can be redriven, at an eighth of --sfn-api-budget at most (0 = never)."`
	AWSRegion          string        `name:"aws-region" help:"AWS region of the Step Functions executions; default from AWS_REGION or the shared AWS config. Credentials and AWS_ENDPOINT_URL(_SFN) come from the standard AWS chain."`
	RestateAdminURL    string        `name:"restate-admin-url" help:"Restate admin API (such as http://restate:9070); when set, the sys_invocation rows of the tracked invocations are polled."`
	RestateServices    []string      `name:"restate-services" help:"Restate services whose new and changed invocations the admin-API poller discovers (comma-separated); without it only invocations already in the view are polled."`
	RestateAdminToken  string        `name:"restate-admin-token" help:"Bearer token for the Restate admin API."`
	RestatePollEvery   time.Duration `name:"restate-poll-interval" default:"15s" help:"How often the tracked Restate invocations are polled."`
	RestatePollAfter   time.Duration `name:"restate-poll-after" default:"0s" help:"Poll only Restate invocations nothing was heard of for this long (0 = all tracked ones, every interval)."`
}

// reconcile holds the worker's pollers; each is nil when not configured.
type reconcile struct {
	reconciler   *recon.Reconciler
	restate      *restate.Poller
	restateAdmin *restate.Client         // the poller's, also the operator's
	sfn          *stepfunctions.Provider // within --sfn-api-budget
	sfnActor     *stepfunctions.Provider // acts on executions, outside the poller's budget
	metrics      *recon.Metrics
}

// openReconciler builds the reconciler for the providers that can be
// polled and the Restate admin poller when its URL is set. Their metrics
// are registered whether or not they run.
func (w *Worker) openReconciler(ctx context.Context) error {
	f := w.Flags.ReconcileFlags
	if err := f.validate(); err != nil {
		return err
	}
	m := recon.NewMetrics(w.registry)
	w.reconcile.metrics = m
	pub := publishers.NewJetStream(w.Bus.JetStream)
	pollers := map[substate.Provider]substate.StatusPoller{}
	sfn, err := w.stepFunctions(ctx, m)
	if err != nil {
		return err
	}
	if sfn != nil {
		pollers[substate.ProviderStepFunctions] = sfn
		w.reconcile.sfn = sfn
	}
	// The built-in engine joins here, as pollers[substate.ProviderEngine],
	// once it implements substate.StatusPoller. Restate has its own poller.
	if len(pollers) > 0 {
		r := recon.NewReconciler(w.View, pollers, pub)
		// The Step Functions provider spends its own API budget, call by call.
		r.After, r.Interval, r.Every, r.QPS = f.ReconcileAfter, f.ReconcileInterval, f.SFNHistoryInterval, 0
		// Failed executions are read once after they fail, and checked for
		// a redrive done elsewhere, with an eighth of the budget.
		r.Failed, r.FailedQPS = w.View, f.SFNAPIBudget/8
		if f.SFNAPIBudget == 0 {
			r.FailedQPS = recon.DefaultFailedQPS
		}
		if f.SFNRedriveCheck > 0 {
			r.RecheckWindow, r.RecheckEvery = stepfunctions.RedriveWindow, f.SFNRedriveCheck
		}
		r.Metrics, r.Logger = m, w.Logger.With("component", "reconciler")
		w.reconcile.reconciler = r
	}
	if f.RestateAdminURL != "" {
		admin := restate.NewClient(f.RestateAdminURL)
		admin.Token, admin.Metrics = f.RestateAdminToken, m
		p := restate.NewPoller(admin, w.View, pub)
		p.Interval, p.After, p.QPS = f.RestatePollEvery, f.RestatePollAfter, f.ReconcileQPS
		p.Services, p.DeadLetters = f.RestateServices, pub
		p.Metrics, p.Logger = m, w.Logger.With("component", "restate-poller")
		w.reconcile.restate, w.reconcile.restateAdmin = p, admin
		w.Logger.Info("polling the restate admin api", "url", f.RestateAdminURL, "interval", f.RestatePollEvery, "services", f.RestateServices)
	}
	return nil
}

// validate checks the durations and the Restate admin URL.
func (f *ReconcileFlags) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--reconcile-interval", f.ReconcileInterval},
		{"--sfn-history-interval", f.SFNHistoryInterval}, {"--restate-poll-interval", f.RestatePollEvery},
	} {
		if d.v <= 0 {
			return substate.Errorf(substate.EINVALID, "%s must be positive, not %s", d.name, d.v)
		}
	}
	if len(f.RestateServices) > 0 && f.RestateAdminURL == "" {
		return substate.Errorf(substate.EINVALID, "--restate-services needs --restate-admin-url")
	}
	for _, n := range []struct {
		name     string
		negative bool
	}{
		{"--reconcile-after", f.ReconcileAfter < 0}, {"--sfn-api-budget", f.SFNAPIBudget < 0},
		{"--sfn-redrive-check-interval", f.SFNRedriveCheck < 0}, {"--restate-poll-after", f.RestatePollAfter < 0},
	} {
		if n.negative {
			return substate.Errorf(substate.EINVALID, "%s must not be negative", n.name)
		}
	}
	if f.RestateAdminURL != "" {
		u, err := url.Parse(f.RestateAdminURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return substate.Errorf(substate.EINVALID, "--restate-admin-url %q is not an http(s) URL", f.RestateAdminURL)
		}
	}
	return nil
}

// stepFunctions returns the Step Functions provider the reconciler polls,
// or nil when Step Functions reconciling is off: by --sfn-reconcile=off,
// or in auto mode when the AWS configuration names no region.
func (w *Worker) stepFunctions(ctx context.Context, m *recon.Metrics) (*stepfunctions.Provider, error) {
	f := w.Flags.ReconcileFlags
	if f.SFNReconcile == "off" {
		return nil, nil
	}
	cfg, err := stepfunctions.LoadConfig(ctx, f.AWSRegion)
	if err == nil && cfg.Region == "" {
		err = substate.Errorf(substate.EINVALID, "no AWS region: set --aws-region or AWS_REGION")
	}
	if err != nil {
		if f.SFNReconcile == "on" {
			return nil, fmt.Errorf("step functions reconciling: %w", err)
		}
		w.Logger.Info("step functions reconciling is off", "reason", err.Error())
		return nil, nil
	}
	count := stepfunctions.CountCalls(func(op string) { m.CountCall(substate.ProviderStepFunctions, op) })
	p := stepfunctions.New(cfg, count, stepfunctions.Budget(f.SFNAPIBudget))
	p.Logger = w.Logger.With("component", "stepfunctions")
	// Actions have a client of their own, and poll the status they
	// publish after an action with it: an operator's action does not wait
	// behind the poller's budget, and a fleet job spends its lane's token
	// buckets (--action-limit) instead.
	w.reconcile.sfnActor = stepfunctions.New(cfg, count)
	w.reconcile.sfnActor.Logger = p.Logger
	p.OnBackoff = func(op string, d time.Duration) { m.SetBackoff(substate.ProviderStepFunctions, op, d) }
	p.OnBehind = func(n int) { m.SetBehind(substate.ProviderStepFunctions, n) }
	w.Logger.Info("polling step functions", "region", cfg.Region, "every", f.SFNHistoryInterval, "api_budget", f.SFNAPIBudget)
	w.checkSFNPermissions(ctx, p)
	return p, nil
}

// runReconcile runs the configured pollers until ctx is done.
func (w *Worker) runReconcile(ctx context.Context) error {
	var actors []func(context.Context) error
	if r := w.reconcile.reconciler; r != nil {
		actors = append(actors, r.Run)
	}
	if p := w.reconcile.restate; p != nil {
		actors = append(actors, p.Run)
	}
	if len(actors) == 0 {
		<-ctx.Done()
		return nil
	}
	return RunGroup(ctx, actors...)
}
