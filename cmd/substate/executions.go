package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
)

// ExecutionsCmd is "substate executions": act on a tenant's current
// execution through a running worker, whichever provider runs it.
type ExecutionsCmd struct {
	Describe ExecutionsDescribeCmd `cmd:"" help:"Describe a tenant's current execution: provider, id, step, input and output, times, attempts."`
	Stop     ExecutionsStopCmd     `cmd:"" help:"Stop a tenant's running execution with a cause (Step Functions StopExecution, Restate cancel or --kill, engine stop). Exit status 0 once the execution is seen stopped, 3 when the provider accepted the stop but it has not taken effect yet (pending: the audit stream records the outcome later), 1 when it was refused, skipped (see --execution-id) or its outcome is unknown."`
	Retry    ExecutionsRetryCmd    `cmd:"" help:"Retry a tenant's failed execution from where it failed (Step Functions redrive, Restate resume of a paused invocation, engine redrive)."`
	Restart  ExecutionsRestartCmd  `cmd:"" help:"Start a new execution of a tenant's ended execution, with the same input."`
}

// ExecutionFlags say which worker to ask and with which key: ServerFlags,
// with the scopes the execution routes need in --api-key's help.
type ExecutionFlags struct {
	Server      string `default:"http://127.0.0.1:8080" help:"Base URL of a running substate worker."`
	APIKey      string `name:"api-key" help:"API key, sent as Authorization: Bearer (needed once the worker has keys): admin scope to stop, retry or restart, read:raw to describe."`
	OutputFlags `embed:""`
}

// Client is the API client of the worker the flags name.
func (f ExecutionFlags) Client() *httpapi.Client {
	return &httpapi.Client{URL: f.Server, APIKey: f.APIKey}
}

// ExecutionsDescribeCmd is "substate executions describe TENANT".
type ExecutionsDescribeCmd struct {
	Tenant         string `arg:"" help:"Tenant id."`
	ExecutionFlags `embed:""`
}

// Run prints the execution.
func (c *ExecutionsDescribeCmd) Run(ctx context.Context, m *Main) error {
	info, err := c.Client().Execution(ctx, c.Tenant)
	if err != nil {
		return err
	}
	return c.Printer(m.Stdout).PrintTable(info, func(wide bool) termtext.Table { return executionTable(info, wide) })
}

// ExecutionActFlags are the flags of every action: on one tenant, or with
// --filter on every tenant the filter selects (a fleet job).
type ExecutionActFlags struct {
	Tenant         string   `arg:"" optional:"" help:"Tenant id; or --filter."`
	Filter         []string `sep:"none" placeholder:"NAME=VALUE,…" help:"Act on every tenant the filter selects, frozen now, as a fleet job (substate actions): subState, hasError, minRetryCount, provider, tenantPrefix, fingerprint, step, workflowType, verb, inStateLongerThan, stuck, as name=value pairs separated by commas (subState=failed,fingerprint=…), repeatable; a comma inside a fingerprint, step, workflowType or reason stays in the value unless a field name and = follow it. The job runs on the worker; this command follows it with a progress bar and exits 0 when it is done, 3 with members still pending, 1 when cancelled."`
	Reason         string   `help:"Why: recorded in the audit event; a stop's cause, which becomes the view's error as \"Stopped: <reason>\" on every provider."`
	DryRun         bool     `name:"dry-run" help:"Check that the provider would accept the action, without taking it. With --filter: the exact set the job would act on now, what would be refused and why, and the provider API calls and time it would cost; nothing is changed."`
	Expect         int      `help:"With --filter: create the job only if the filter selects exactly this many tenants (the total a --dry-run showed); otherwise nothing is done." default:"-1"`
	Detach         bool     `help:"With --filter: create the job and print it, without following it."`
	ExecutionID    string   `name:"execution-id" placeholder:"ID" help:"On one tenant: act only if its current execution is this one (the id describe or a --dry-run showed); if it is another one by now, the action is skipped and recorded so, nothing reaches the provider, and the exit status is 1. Not with --filter: a fleet job holds each member to the execution it saw by itself."`
	ExecutionFlags `embed:""`
}

// ExecutionsStopCmd is "substate executions stop TENANT".
type ExecutionsStopCmd struct {
	ExecutionActFlags `embed:""`
	Kill              bool `help:"Kill a Restate invocation at once, without running its compensations. The engine's stop is immediate anyway; Step Functions has no kill and refuses it (a --dry-run says so too)."`
}

// Run stops the execution.
func (c *ExecutionsStopCmd) Run(ctx context.Context, m *Main) error {
	return c.act(ctx, m, substate.ActionStop, c.Kill)
}

// ExecutionsRetryCmd is "substate executions retry TENANT".
type ExecutionsRetryCmd struct {
	ExecutionActFlags `embed:""`
}

// Run retries the execution.
func (c *ExecutionsRetryCmd) Run(ctx context.Context, m *Main) error {
	return c.act(ctx, m, substate.ActionRetry, false)
}

// ExecutionsRestartCmd is "substate executions restart TENANT".
type ExecutionsRestartCmd struct {
	ExecutionActFlags `embed:""`
}

// Run restarts the execution.
func (c *ExecutionsRestartCmd) Run(ctx context.Context, m *Main) error {
	return c.act(ctx, m, substate.ActionRestart, false)
}

// act posts the action and prints what was done.
func (c *ExecutionActFlags) act(ctx context.Context, m *Main, action substate.ExecutionAction, kill bool) error {
	switch {
	case len(c.Filter) > 0 && c.Tenant != "":
		return substate.Errorf(substate.EINVALID, "give a tenant or --filter, not both")
	case len(c.Filter) > 0 && c.ExecutionID != "":
		return substate.Errorf(substate.EINVALID, "--execution-id is for one tenant; a fleet job holds each member to the execution it saw by itself")
	case len(c.Filter) > 0:
		return c.fleet(ctx, m, action, kill)
	case c.Tenant == "":
		return substate.Errorf(substate.EINVALID, "%v", errNoTarget)
	}
	req := httpapi.ActionRequest{Reason: c.Reason, Kill: kill, DryRun: c.DryRun, ExecutionID: c.ExecutionID}
	res, err := c.Client().Act(ctx, c.Tenant, action, req)
	if err != nil && c.DryRun && substate.AuditOutcome(err) == substate.AuditRefused {
		return substate.WrapError(substate.ErrorCode(err), err, "dry run: %s of tenant %s would be refused", action, c.Tenant)
	}
	if err != nil {
		return err
	}
	err = c.Printer(m.Stdout).Print(res, func(w io.Writer, _ bool) error {
		printResult(w, action, res)
		return nil
	})
	switch {
	case err != nil:
		return err
	case res.Outcome == substate.AuditPending:
		return exitError{ExitPending}
	case res.Outcome == substate.AuditSkipped && !res.DryRun:
		return exitError{1} // not taken: the tenant is not as the caller saw it
	}
	return nil
}

// ExitPending is the exit status of an action the provider accepted whose
// effect is not seen yet: not a failure, not done.
const ExitPending = 3

// printResult says what an action did: done only for an outcome the
// provider's state showed.
func printResult(w io.Writer, action substate.ExecutionAction, res substate.ExecutionResult) {
	verb := map[substate.ExecutionAction]string{substate.ActionStop: "stopped", substate.ActionRetry: "retried", substate.ActionRestart: "restarted"}[action]
	switch {
	case res.DryRun && res.Outcome != "":
		// A dry run that carries an outcome did not pass: refused (or
		// skipped, the tenant changed), never "would be accepted".
		would := "would be refused"
		if res.Outcome == substate.AuditSkipped {
			would = "would be skipped"
		}
		if res.Next != "" {
			would += ": " + res.Next
		}
		fmt.Fprintf(w, "dry run: %s of %s execution %s (tenant %s) %s\n", action, res.Provider, res.ExecutionID, res.TenantID, would)
	case res.DryRun:
		fmt.Fprintf(w, "dry run: %s of %s execution %s (tenant %s) passes substate's checks; the provider decides when it is taken\n", action, res.Provider, res.ExecutionID, res.TenantID)
	case res.Outcome == substate.AuditPending:
		fmt.Fprintf(w, "%s of %s execution %s is pending, not yet effective (tenant %s, audit %s): %s\n", action, res.Provider, res.ExecutionID, res.TenantID, res.AuditID, res.Next)
	case res.Outcome == substate.AuditSkipped:
		fmt.Fprintf(w, "%s of %s execution %s skipped (tenant %s, audit %s): %s\n", action, res.Provider, res.ExecutionID, res.TenantID, res.AuditID, res.Next)
	case res.NewExecutionID != "":
		fmt.Fprintf(w, "%s %s execution %s as %s (tenant %s, audit %s)\n", verb, res.Provider, res.ExecutionID, res.NewExecutionID, res.TenantID, res.AuditID)
	default:
		fmt.Fprintf(w, "%s %s execution %s (tenant %s, audit %s)\n", verb, res.Provider, res.ExecutionID, res.TenantID, res.AuditID)
	}
}

// executionTable is a described execution, one field a row; wide shows
// more of the error, input and output.
func executionTable(x substate.ExecutionInfo, wide bool) termtext.Table {
	n := 200
	if wide {
		n = 2000
	}
	var t termtext.Table
	row := func(k, v string) { t.Rows = append(t.Rows, []string{k, termtext.Dash(v)}) }
	row("tenant", termtext.Text(x.TenantID))
	row("provider", termtext.Text(string(x.Provider)))
	row("execution", termtext.Text(x.ExecutionID))
	row("workflow", termtext.Text(x.Workflow))
	row("state", termtext.Text(x.ProviderState))
	row("step", termtext.Text(x.Step))
	row("attempts", fmt.Sprint(x.Attempts))
	if x.Redrives > 0 {
		row("redrives", fmt.Sprint(x.Redrives))
	}
	row("started", stamp(x.StartedAt))
	row("stopped", stamp(x.StoppedAt))
	row("error", termtext.Clip(strings.TrimSpace(x.Error+" "+x.Cause), n))
	row("input", termtext.Clip(string(x.Input), n))
	row("output", termtext.Clip(string(x.Output), n))
	retry := "yes"
	if !x.Retryable {
		retry = "no: " + termtext.Text(x.RetryRefusal)
	}
	row("retryable", retry)
	if x.KillRefusal != "" && !x.Ended {
		row("killable", "no: "+termtext.Text(x.KillRefusal))
	}
	return t
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
