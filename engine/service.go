package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/substatehq/substate"
)

// The control endpoint: a nats micro service through which the CLI starts
// executions on a running worker.
const (
	ControlService = "substate-engine"
	ControlSubject = "substate.engine.start"
)

// StartCommand is the request of the control endpoint: a definition (YAML
// or JSON text) and an execution of it to start.
type StartCommand struct {
	Definition string          `json:"definition"`
	Name       string          `json:"name,omitempty"`
	TenantID   string          `json:"tenantId"`
	Input      json.RawMessage `json:"input,omitempty"`
}

// controlError is the body of a failed control request.
type controlError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// serveControl registers the control service on Conn.
func (e *Engine) serveControl() (micro.Service, error) {
	svc, err := micro.AddService(e.Conn, micro.Config{
		Name:        ControlService,
		Version:     "1.0.0",
		Description: "starts, describes, stops, retries and restarts executions of substate's built-in workflow engine",
	})
	if err != nil {
		return nil, fmt.Errorf("add control service: %w", err)
	}
	err = svc.AddEndpoint("start", micro.HandlerFunc(e.handleStart), micro.WithEndpointSubject(ControlSubject))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("add control endpoint: %w", err)
	}
	if err := e.addOperationEndpoints(svc); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}

// handleStart validates and stores the definition and starts the execution.
func (e *Engine) handleStart(req micro.Request) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	x, err := e.startCommand(ctx, req.Data())
	if err != nil {
		respondError(req, err)
		return
	}
	_ = req.RespondJSON(x)
}

// respondError answers a control request with err's code and caller-safe
// message. Headers are one line: the full message travels in the body.
func respondError(req micro.Request, err error) {
	var body controlError
	body.Error.Code, body.Error.Message = substate.ErrorCode(err), controlMessage(err)
	data, _ := json.Marshal(body)
	_ = req.Error(body.Error.Code, strings.ReplaceAll(body.Error.Message, "\n", "; "), data)
}

func (e *Engine) startCommand(ctx context.Context, data []byte) (Execution, error) {
	var cmd StartCommand
	if err := json.Unmarshal(data, &cmd); err != nil {
		return Execution{}, substate.WrapError(substate.EINVALID, err, "decode start command")
	}
	ref, err := e.EnsureWorkflow(ctx, Workflow{Definition: []byte(cmd.Definition)})
	if err != nil {
		return Execution{}, err
	}
	return e.Start(ctx, StartRequest{Workflow: ref, Name: cmd.Name, TenantID: cmd.TenantID, Input: cmd.Input})
}

// controlMessage is the caller-safe message, with every validation problem.
func controlMessage(err error) string {
	var verrs ValidationErrors
	if errors.As(err, &verrs) {
		return "invalid workflow definition:\n" + verrs.Error()
	}
	return substate.ErrorMessage(err)
}

// RequestStart asks a running engine, through the control endpoint, to
// start an execution. Errors the engine reports come back as *substate.Error
// with their code; no engine listening is EUNAVAILABLE.
func RequestStart(ctx context.Context, nc *nats.Conn, cmd StartCommand) (Execution, error) {
	var x Execution
	err := controlRequest(ctx, nc, ControlSubject, cmd, &x)
	return x, err
}

// controlRequest sends cmd as JSON to a control endpoint and decodes its
// answer into reply. An error the engine answers comes back as
// *substate.Error with its code; no engine listening is EUNAVAILABLE.
func controlRequest(ctx context.Context, nc *nats.Conn, subject string, cmd, reply any) error {
	data, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("encode control command: %w", err)
	}
	resp, err := nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return substate.Errorf(substate.EUNAVAILABLE, "no workflow engine is running")
	} else if err != nil {
		return substate.WrapError(substate.EUNAVAILABLE, err, "ask the engine (%s)", subject)
	}
	if resp.Header.Get(micro.ErrorCodeHeader) != "" {
		var body controlError
		if json.Unmarshal(resp.Data, &body) != nil || body.Error.Code == "" {
			return substate.Errorf(substate.EINTERNAL, "%s", resp.Header.Get(micro.ErrorHeader))
		}
		return &substate.Error{Code: body.Error.Code, Message: body.Error.Message}
	}
	if err := json.Unmarshal(resp.Data, reply); err != nil {
		return fmt.Errorf("decode engine reply: %w", err)
	}
	return nil
}
