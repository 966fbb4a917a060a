package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/stepfunctions"
)

// WorkflowCmd is "substate workflow".
type WorkflowCmd struct {
	Validate WorkflowValidateCmd `cmd:"" help:"Check workflow definitions; print file:line:col: state \"x\": message for each problem."`
	Start    WorkflowStartCmd    `cmd:"" help:"Start an execution of a workflow for a tenant."`
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
			fmt.Fprintln(m.Stdout, err)
			continue
		}
		fmt.Fprintf(m.Stdout, "%s: ok\n", f)
	}
	if bad > 0 {
		return exitError{code: 1}
	}
	return nil
}

// WorkflowStartCmd is "substate workflow start FILE --tenant T".
type WorkflowStartCmd struct {
	File        string `arg:"" help:"Definition file: substate YAML/JSON for the engine, Amazon States Language JSON for Step Functions (named after the file: orders.asl.json creates or reuses the state machine orders)."`
	Tenant      string `required:"" help:"Tenant the execution provisions."`
	Input       string `default:"{}" help:"Execution input, a JSON object."`
	Name        string `help:"Execution name, the idempotency key: starting the same name and input again is a no-op (default: generated)."`
	Provider    string `enum:"engine,stepfunctions" default:"engine" help:"Where to run it: the engine of a running worker, or AWS Step Functions."`
	RoleARN     string `name:"role-arn" help:"IAM role Step Functions runs a new state machine with."`
	Region      string `help:"AWS region (default: the SDK's configuration, e.g. AWS_REGION)."`
	AccountID   string `help:"AWS account of the state machine (default: learned from the API)."`
	JSON        bool   `name:"json" help:"Print the execution as JSON."`
	ClientFlags `embed:""`
}

// Run starts the execution and prints it.
func (c *WorkflowStartCmd) Run(ctx context.Context, m *Main) error {
	if !json.Valid([]byte(c.Input)) || !strings.HasPrefix(strings.TrimSpace(c.Input), "{") {
		return substate.Errorf(substate.EINVALID, "--input must be a JSON object")
	}
	def, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	var x engine.Execution
	if c.Provider == "stepfunctions" {
		x, err = c.startStepFunctions(ctx, def)
	} else {
		x, err = c.startEngine(ctx, def)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(m.Stdout, x)
	}
	verb := "started"
	if x.Existing {
		verb = "already started" // running or closed: the name is taken with this input
	}
	fmt.Fprintf(m.Stdout, "%s %s (workflow %s, tenant %s)\n", verb, x.ID, x.Workflow, c.Tenant)
	return nil
}

func (c *WorkflowStartCmd) startEngine(ctx context.Context, def []byte) (engine.Execution, error) {
	if _, err := engine.Parse(c.File, def); err != nil {
		return engine.Execution{}, err
	}
	nc, _, err := c.Connect()
	if err != nil {
		return engine.Execution{}, err
	}
	defer nc.Close()
	return engine.RequestStart(ctx, nc, engine.StartCommand{
		Definition: string(def), Name: c.Name, TenantID: c.Tenant, Input: json.RawMessage(c.Input),
	})
}

func (c *WorkflowStartCmd) startStepFunctions(ctx context.Context, def []byte) (engine.Execution, error) {
	cfg, err := stepfunctions.LoadConfig(ctx, c.Region)
	if err != nil {
		return engine.Execution{}, err
	}
	p := stepfunctions.New(cfg)
	p.RoleARN, p.AccountID = c.RoleARN, c.AccountID
	ref, err := p.EnsureWorkflow(ctx, engine.Workflow{Name: stateMachineName(c.File), Definition: def})
	if err != nil {
		return engine.Execution{}, err
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
