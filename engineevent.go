package substate

import (
	"encoding/json"
	"strconv"
	"time"
)

// Engine status names: the built-in engine's own vocabulary for what an
// execution is doing. They are the canonical sub-state names on purpose, so
// the mapping is the identity, but they are a provider's native states like
// any other and unknown ones map to running.
const (
	EngineRunning    = "running"     // a task attempt started (or the execution started)
	EngineWaiting    = "waiting"     // in a Wait state
	EngineBackingOff = "backing-off" // between two attempts of a task
	EngineError      = "error"       // an attempt failed; a retry or catch may follow
	EngineSucceeded  = "succeeded"   // reached a Success state
	EngineFailed     = "failed"      // reached a Fail state or an uncaught error
)

// EngineEvent is one status event emitted by the built-in engine, published
// on substate.raw.engine.status and mapped like any provider's payload.
type EngineEvent struct {
	ID          string    `json:"id"`          // unique: "<execution>/<seq>"
	TenantID    string    `json:"tenantId"`    // the tenant the execution was started for
	ExecutionID string    `json:"executionId"` // the execution name
	Workflow    string    `json:"workflow"`    // the workflow definition's name
	Seq         uint64    `json:"seq"`         // per-execution emission sequence, from 1
	Status      string    `json:"status"`      // one of the Engine* names
	State       string    `json:"state"`       // the workflow state being executed
	Attempt     int       `json:"attempt"`     // attempt number of the current task, from 1
	RetryCount  int       `json:"retryCount"`  // retries in the execution so far, over all its tasks
	ErrorType   string    `json:"errorType,omitempty"`
	Error       string    `json:"error,omitempty"` // human message (the cause)
	NextRetryAt time.Time `json:"nextRetryAt,omitzero"`
	StartedAt   time.Time `json:"startedAt"` // when the execution started
	Time        time.Time `json:"time"`      // when this happened

	// Stopped marks the failed event of an execution ended by Engine.Stop
	// (an operator), which maps to the verb cancelled.
	Stopped bool `json:"stopped,omitempty"`
	// Output is the execution's output, on the succeeded event only, when
	// it is at most MaxEngineOutput bytes of compact JSON; OutputSize is its
	// size either way, so an output left out is told from none.
	Output     json.RawMessage `json:"output,omitempty"`
	OutputSize int             `json:"outputSize,omitempty"`
}

// MaxEngineOutput is the largest execution output an engine event carries
// (as Step Functions bounds its payloads at 256 KiB). A larger output stays
// in the engine's execution record only.
const MaxEngineOutput = 256 << 10

// EngineEventID returns the id of the seq-th event of an execution.
func EngineEventID(execution string, seq uint64) string {
	return execution + "/" + strconv.FormatUint(seq, 10)
}
