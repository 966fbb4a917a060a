package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/substatehq/substate"
)

// Provider is a workflow engine that substate can create workflows on, start
// executions on and ask for an execution's current status.
type Provider interface {
	// Name returns the provider's name.
	Name() substate.Provider
	// EnsureWorkflow creates the workflow if it does not exist yet and returns
	// its reference (a name, or an ARN); an existing one is left as it is.
	EnsureWorkflow(ctx context.Context, w Workflow) (string, error)
	// Start starts an execution under a caller-given name. Starting the same
	// name with the same input again returns the existing execution with
	// Existing set; a different input is an ECONFLICT error.
	Start(ctx context.Context, req StartRequest) (Execution, error)
	// Describe returns the execution's current status as raw provider
	// evidence, a raw event the mapping package turns into the canonical
	// event (mapping.Mapper.Map), as the normalizer does. Unknown ids are
	// ENOTFOUND.
	Describe(ctx context.Context, executionID string) (Status, error)
	// Stop ends a running execution with an error and cause.
	Stop(ctx context.Context, executionID, errorType, cause string) error
	// DeleteWorkflow deletes a workflow by reference.
	DeleteWorkflow(ctx context.Context, ref string) error
}

// Workflow is a workflow definition to create on a provider.
type Workflow struct {
	Name       string
	Definition []byte // the provider's own language (substate YAML/JSON, or ASL JSON)
}

// StartRequest asks a provider to start one execution.
type StartRequest struct {
	Workflow string          // reference returned by EnsureWorkflow
	Name     string          // execution name, the idempotency key
	TenantID string          // the tenant the execution provisions
	Input    json.RawMessage // execution input, a JSON object
}

// Execution identifies a started execution.
type Execution struct {
	ID        string    `json:"id"` // provider execution id (engine: the name; Step Functions: the ARN)
	Name      string    `json:"name"`
	Workflow  string    `json:"workflow"`
	StartedAt time.Time `json:"startedAt"`
	Existing  bool      `json:"existing,omitempty"` // the execution already existed with the same input
}

// Status is an execution's current status: the raw provider evidence, ready
// to publish on SUBSTATE_RAW. Providers do not map it themselves (adapters
// do not import each other); the caller maps Raw with the mapping package.
type Status struct {
	Raw substate.RawEvent
}
