package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/jsonx"
)

// Start starts an execution of a stored workflow under req.Name (a
// generated one when empty). The execution's record is durable before Start
// returns. Starting a name that exists with the same workflow, tenant and
// input returns the existing execution with Existing set; anything else
// under that name is an ECONFLICT error.
func (e *Engine) Start(ctx context.Context, req StartRequest) (Execution, error) {
	if e.db == nil {
		return Execution{}, errors.New("start execution: engine is not open")
	}
	rec, def, err := e.newRecord(req)
	if err != nil {
		return Execution{}, err
	}
	existing, err := e.db.createExecution(rec)
	if err != nil {
		return Execution{}, fmt.Errorf("store execution: %w", err)
	}
	if existing != nil {
		if existing.Workflow != rec.Workflow || existing.TenantID != rec.TenantID || !bytes.Equal(existing.Input, rec.Input) {
			return Execution{}, substate.Errorf(substate.ECONFLICT, "execution %q exists with a different workflow, tenant or input", rec.ID)
		}
		x := existing.execution()
		x.Existing = true
		return x, nil
	}
	e.Logger.Info("execution started", "execution", rec.ID, "workflow", rec.Workflow, "tenant", rec.TenantID)
	e.launch(rec, def)
	return rec.execution(), nil
}

// newRecord checks a start request and builds the new execution's record.
func (e *Engine) newRecord(req StartRequest) (*record, *Definition, error) {
	if req.Workflow == "" {
		return nil, nil, substate.Errorf(substate.EINVALID, "start request names no workflow")
	}
	name := req.Name
	if name == "" {
		name = generatedName(req.Workflow)
	}
	if err := checkExecutionName(name); err != nil {
		return nil, nil, err
	}
	input, err := normalizeInput(req.Input)
	if err != nil {
		return nil, nil, err
	}
	key, _, err := e.db.workflow(req.Workflow)
	if err != nil {
		return nil, nil, err
	}
	def, err := e.definition(key)
	if err != nil {
		return nil, nil, err
	}
	rec := &record{
		ID: name, Workflow: req.Workflow, TenantID: req.TenantID, Input: input,
		Definition: key, StartedAt: e.Clock.Now(), Phase: phaseEnter, State: def.StartAt,
		Step: 1, Data: input, Status: substate.EngineRunning,
	}
	if def.Timeout > 0 {
		rec.TimeoutAt = rec.StartedAt.Add(def.Timeout)
	}
	return rec, def, nil
}

func generatedName(workflow string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return workflow + "-" + hex.EncodeToString(b[:])
}

// checkExecutionName accepts 1 to 256 bytes of printable text without '/'
// (event ids and idempotency keys use '/' as their separator).
func checkExecutionName(name string) error {
	if len(name) > 256 {
		return substate.Errorf(substate.EINVALID, "execution name is longer than 256 bytes")
	}
	if strings.ContainsRune(name, '/') || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return substate.Errorf(substate.EINVALID, "execution name %q must be printable and contain no '/'", name)
	}
	return nil
}

// normalizeInput requires a JSON object (empty input is {}) and compacts it
// so that equal inputs compare equal.
func normalizeInput(in json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage("{}"), nil
	}
	v, err := jsonx.Decode(in)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "execution input is not JSON")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, substate.Errorf(substate.EINVALID, "execution input must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, in); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "execution input is not JSON")
	}
	return buf.Bytes(), nil
}

// Stop ends an unfinished execution as failed with errorType (Stopped when
// empty) and cause, and publishes the failed event, marked stopped (the
// verb cancelled), before returning.
func (e *Engine) Stop(ctx context.Context, executionID, errorType, cause string) error {
	e.mu.Lock()
	r := e.runners[executionID]
	e.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
	rec, err := e.db.execution(executionID)
	if err != nil {
		return err
	}
	if rec.Phase == phaseDone {
		return substate.Errorf(substate.ECONFLICT, "execution %q already %s", executionID, rec.Status)
	}
	if errorType == "" {
		errorType = ErrStopped
	}
	rec.Stopped = true
	rec = e.finish(rec, substate.EngineFailed, &TaskError{Type: errorType, Message: cause})
	if err := e.db.putExecution(rec); err != nil {
		return fmt.Errorf("store stopped execution: %w", err)
	}
	e.Logger.Info("execution stopped", "execution", executionID, "errorType", errorType)
	return e.flush(ctx, rec)
}
