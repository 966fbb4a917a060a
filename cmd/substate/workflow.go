package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/providers/stepfunctions"
)

// WorkflowCmd is "substate workflow".
type WorkflowCmd struct {
	Validate     WorkflowValidateCmd     `cmd:"" help:"Check workflow definitions; print file:line:col: state \"x\": message for each problem."`
	Start        WorkflowStartCmd        `cmd:"" help:"Start an execution of a workflow for a tenant."`
	DemoServices WorkflowDemoServicesCmd `cmd:"" name:"demo-services" help:"Serve the task services of engine/demo/order_processing.yaml until interrupted."`
}

// WorkflowValidateCmd is "substate workflow validate FILE…".
type WorkflowValidateCmd struct {
	// Plain strings, not existingfile: that type makes paths absolute, and
	// problems should name the file as the user wrote it.
	Files []string `arg:"" help:"Definition files (YAML or JSON)."`
}

// Run validates every file and fails if any has a problem.
func (c *WorkflowValidateCmd) Run(m *Main) error {
	bad := 0
	for _, f := range c.Files {
		if _, err := engine.ParseFile(f); err != nil {
			bad++
			fmt.Fprintln(m.Stdout, termtext.Lines(err.Error()))
			continue
		}
		fmt.Fprintf(m.Stdout, "%s: ok\n", termtext.Text(f))
	}
	if bad > 0 {
		return exitError{code: 1}
	}
	return nil
}

// WorkflowStartCmd is "substate workflow start FILE --tenant T".
type WorkflowStartCmd struct {
	File        string `arg:"" help:"Definition file: substate YAML/JSON for the engine, Amazon States Language JSON for Step Functions (named after the file: orders.asl.json creates the state machine orders, or updates it to a changed definition and publishes a version); or, with --provider stepfunctions, the ARN of an existing state machine to start as it is."`
	Tenant      string `required:"" help:"Tenant the execution provisions."`
	Input       string `default:"{}" help:"Execution input, a JSON object."`
	Name        string `help:"Execution name, the idempotency key: starting the same name and input again is a no-op (default: generated)."`
	Provider    string `enum:"engine,stepfunctions" default:"engine" help:"Where to run it: the engine of a running worker, or AWS Step Functions."`
	RoleARN     string `name:"role-arn" help:"IAM role Step Functions runs a new state machine with."`
	Region      string `help:"AWS region (default: the SDK's configuration, e.g. AWS_REGION)."`
	AccountID   string `help:"AWS account of the state machine (default: learned from the API)."`
	OutputFlags `embed:""`
	ClientFlags `embed:""`
}

// Run starts the execution and prints it.
func (c *WorkflowStartCmd) Run(ctx context.Context, m *Main) error {
	if !json.Valid([]byte(c.Input)) || !strings.HasPrefix(strings.TrimSpace(c.Input), "{") {
		return substate.Errorf(substate.EINVALID, "--input must be a JSON object")
	}
	var def []byte
	var err error
	if byARN := strings.HasPrefix(c.File, "arn:"); byARN && c.Provider != "stepfunctions" {
		return substate.Errorf(substate.EINVALID, "%s is an ARN: start an existing state machine with --provider stepfunctions", c.File)
	} else if !byARN {
		if def, err = os.ReadFile(c.File); err != nil {
			return err
		}
	}
	var x engine.Execution
	var unserved []string
	if c.Provider == "stepfunctions" {
		x, err = c.startStepFunctions(ctx, m, def)
	} else {
		x, unserved, err = c.startEngine(ctx, def)
	}
	if err != nil {
		return err
	}
	if len(unserved) > 0 {
		fmt.Fprint(m.Stderr, termtext.Lines(unservedWarning(unserved, c.URL())))
	}
	return c.Printer(m.Stdout).Print(x, func(w io.Writer, _ bool) error {
		verb := "started"
		if x.Existing {
			verb = "already started" // running or closed: the name is taken with this input
		}
		_, err := fmt.Fprintf(w, "%s %s (workflow %s, tenant %s)\n", verb, termtext.Text(x.ID), termtext.Text(x.Workflow), termtext.Text(c.Tenant))
		return err
	})
}

// startEngine starts the execution on the worker's engine and returns the
// resources no task service announces.
func (c *WorkflowStartCmd) startEngine(ctx context.Context, def []byte) (engine.Execution, []string, error) {
	d, err := engine.Parse(c.File, def)
	if err != nil {
		return engine.Execution{}, nil, err
	}
	nc, _, err := c.Connect()
	if err != nil {
		return engine.Execution{}, nil, err
	}
	defer nc.Close()
	x, err := engine.RequestStart(ctx, nc, engine.StartCommand{
		Definition: string(def), Name: c.Name, TenantID: c.Tenant, Input: json.RawMessage(c.Input),
	})
	if err != nil {
		return x, nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	unserved, _ := engine.UnservedResources(dctx, nc, d) // a hint: no answer is no warning
	return x, unserved, nil
}

// unservedWarning says which task services are missing and how to start them.
func unservedWarning(unserved []string, natsURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "warning: no task service answers for %s\n", strings.Join(unserved, ", "))
	b.WriteString("  A task is a NATS request to substate.tasks.<service>.<operation>. With nobody there it fails with\n" +
		"  ServiceUnavailable after 3 retries (about 7 s), and the execution fails unless a catch takes it.\n")
	fmt.Fprintf(&b, "  Start a task service for each, connected to %s (a nats micro service; see docs/engine.md, Tasks).\n", natsURL)
	if !slices.ContainsFunc(unserved, func(r string) bool { return !demo.Serves(r) }) {
		fmt.Fprintf(&b, "  These are the demo's: substate workflow demo-services --nats-url %s serves them all\n"+
			"  (as the task-service identity: with the worker's --data-dir, or --nats-nkey <data-dir>/nats/credentials/tasks.nk).\n", natsURL)
	}
	return b.String()
}

// WorkflowDemoServicesCmd is "substate workflow demo-services": the task
// services of the demo's order workflow, for a worker started with
// "substate run".
type WorkflowDemoServicesCmd struct {
	ClientFlags `embed:""`
}

// Run serves the demo task services until ctx ends.
func (c *WorkflowDemoServicesCmd) Run(ctx context.Context, m *Main) (err error) {
	nc, _, err := c.ConnectAs(bus.Tasks)
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := demo.Register(nc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Stop()) }()
	fmt.Fprintf(m.Stdout, "serving the demo task services on %s; interrupt to stop\n", c.URL())
	<-ctx.Done()
	return nil
}

// startStepFunctions starts the execution on Step Functions: of the state
// machine the definition creates or updates, or of the one c.File names
// by ARN (def nil).
func (c *WorkflowStartCmd) startStepFunctions(ctx context.Context, m *Main, def []byte) (engine.Execution, error) {
	cfg, err := stepfunctions.LoadConfig(ctx, c.Region)
	if err != nil {
		return engine.Execution{}, err
	}
	p := stepfunctions.New(cfg)
	p.RoleARN, p.AccountID = c.RoleARN, c.AccountID
	p.OnUpdate = func(machine, version string) {
		fmt.Fprintf(m.Stderr, "the definition changed: updated state machine %s, published version %s\n", machine, version)
	}
	ref := c.File
	if def != nil {
		if ref, err = p.EnsureWorkflow(ctx, engine.Workflow{Name: stateMachineName(c.File), Definition: def}); err != nil {
			return engine.Execution{}, err
		}
	}
	return p.Start(ctx, engine.StartRequest{Workflow: ref, Name: c.Name, TenantID: c.Tenant, Input: json.RawMessage(c.Input)})
}

// stateMachineName is the state machine a definition file creates: the
// file name without its extension, and without ".asl" (AWS tools name ASL
// files NAME.asl.json).
func stateMachineName(file string) string {
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	return strings.TrimSuffix(name, ".asl")
}
