package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"

	"github.com/substatehq/substate/internal/shellcomplete"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/worker"
)

// CLI is the command tree. Every flag also reads SUBSTATE_<FLAG> from the
// environment.
type CLI struct {
	Demo     DemoCmd     `cmd:"" help:"See substate work: the worker driven by real workflows and provider events until every tenant settles."`
	Run      RunCmd      `cmd:"" help:"Run the worker: ingress, normalizer, projector, engine and query API."`
	Tenants  TenantsCmd  `cmd:"" help:"Query the tenant view of a running worker."`
	Events   EventsCmd   `cmd:"" help:"Read canonical events from the bus."`
	Workflow WorkflowCmd `cmd:"" help:"Validate workflow definitions and start executions."`

	Executions ExecutionsCmd `cmd:"" help:"Describe, stop, retry or restart a tenant's execution on any provider, or every tenant a --filter selects, through a running worker."`
	Actions    ActionsCmd    `cmd:"" help:"Follow, pause, resume, cancel and report the fleet jobs (executions retry --filter …) of a running worker."`

	Audit       AuditCmd       `cmd:"" help:"Tell one tenant's history from the retained streams: each event and what it did to the view."`
	Rebuild     RebuildCmd     `cmd:"" help:"Fold SUBSTATE_EVENTS into a fresh view file, as of now or of a past time."`
	Verify      VerifyCmd      `cmd:"" help:"Check that a running worker's view equals a replay of SUBSTATE_EVENTS."`
	Renormalize RenormalizeCmd `cmd:"" help:"Map SUBSTATE_RAW again with the current mapping into SUBSTATE_EVENTS, idempotently."`
	Deploy      DeployCmd      `cmd:"" help:"Wire providers to substate: the EventBridge connection, API destination and rule."`
	Bench       BenchCmd       `cmd:"" help:"Measure the real pipeline in process: throughput, latency, view writes and memory, against the performance budget."`
	Soak        SoakCmd        `cmd:"" help:"Kill the worker with SIGKILL under load, again and again, then check that no acknowledged event was lost and verify the view."`

	Version    VersionCmd    `cmd:"" help:"Print substate's version, the commit it was built from and its Go version."`
	Completion CompletionCmd `cmd:"" help:"Print the shell completion script for bash, zsh or fish."`

	PrintVersion kong.VersionFlag `name:"version" env:"-" help:"Print the version on one line and exit."`
}

// Main runs one substate command; end-to-end tests drive it as main does.
type Main struct {
	Stdout, Stderr io.Writer
	// Ready, when set, is called by long-running commands once they serve.
	Ready func(w *worker.Worker)
}

// NewMain returns a Main writing to the process's standard streams.
func NewMain() *Main { return &Main{Stdout: os.Stdout, Stderr: os.Stderr} }

// Run parses args, runs the command until it ends or ctx is done, and
// returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	var cli CLI
	exit := -1
	parser, err := kong.New(&cli,
		kong.Name("substate"),
		kong.Description("Canonical workflow sub-states for multi-tenant control planes, on NATS JetStream."),
		kong.DefaultEnvars("SUBSTATE"),
		kong.UsageOnError(),
		kong.Writers(m.Stdout, m.Stderr),
		kong.Exit(func(code int) { exit = code }),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(m),
		kong.Vars{"version": versionLine()},
	)
	if err != nil {
		fmt.Fprintln(m.Stderr, "substate:", err)
		return 2
	}
	if len(args) == 2 && args[0] == shellcomplete.Command {
		return m.complete(parser.Model.Node, args[1])
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 {
		return exit // --help
	}
	if err != nil {
		parser.Errorf("%s", err)
		return 2
	}
	if err := kctx.Run(); err != nil {
		return m.fail(ctx, err)
	}
	return 0
}

// exitError carries an exit code without a message of its own.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// fail prints err on one line and returns the exit status: 0 only for a
// command stopped by a signal (ctx done) that ended with that
// cancellation, never for a failure that merely wraps a cancellation.
func (m *Main) fail(ctx context.Context, err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintln(m.Stderr, "substate:", termtext.Lines(err.Error()))
	return 1
}
