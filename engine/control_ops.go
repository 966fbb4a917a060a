package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
)

// Subjects of the control endpoints that act on executions, so a worker
// whose engine runs in another process (--role engine) can describe, stop,
// retry and restart them.
const (
	ControlDescribeSubject = "substate.engine.describe"
	ControlStopSubject     = "substate.engine.stop"
	ControlRetrySubject    = "substate.engine.retry"
	ControlRestartSubject  = "substate.engine.restart"
)

// OperationCommand is the request of the execution endpoints.
type OperationCommand struct {
	ExecutionID string `json:"executionId"`
	Cause       string `json:"cause,omitempty"` // stop
}

// operationReply is the answer of the execution endpoints.
type operationReply struct {
	Execution      *substate.ExecutionInfo `json:"execution,omitempty"`
	NewExecutionID string                  `json:"newExecutionId,omitempty"`
}

// addOperationEndpoints adds the execution endpoints to the control service.
func (e *Engine) addOperationEndpoints(svc micro.Service) error {
	for name, subject := range map[string]string{
		"describe": ControlDescribeSubject, "stop": ControlStopSubject,
		"retry": ControlRetrySubject, "restart": ControlRestartSubject,
	} {
		h := micro.HandlerFunc(func(req micro.Request) { e.handleOperation(name, req) })
		if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject(subject)); err != nil {
			return fmt.Errorf("add control endpoint %s: %w", name, err)
		}
	}
	return nil
}

// handleOperation runs one execution operation for the control endpoint.
func (e *Engine) handleOperation(name string, req micro.Request) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	var cmd OperationCommand
	var reply operationReply
	err := json.Unmarshal(req.Data(), &cmd)
	if err != nil {
		err = substate.WrapError(substate.EINVALID, err, "decode %s command", name)
	} else {
		switch name {
		case "describe":
			var info substate.ExecutionInfo
			if info, err = e.DescribeExecution(ctx, cmd.ExecutionID); err == nil {
				reply.Execution = &info
			}
		case "stop":
			err = e.StopExecution(ctx, cmd.ExecutionID, substate.StopOptions{Cause: cmd.Cause})
		case "retry":
			err = e.RetryExecution(ctx, cmd.ExecutionID)
		case "restart":
			reply.NewExecutionID, err = e.RestartExecution(ctx, cmd.ExecutionID)
		}
	}
	if err != nil {
		respondError(req, err)
		return
	}
	_ = req.RespondJSON(reply)
}

// RemoteOperator acts on the executions of an engine running in another
// process, through its control endpoints. Errors the engine reports come
// back with their code; no engine listening is EUNAVAILABLE.
type RemoteOperator struct {
	Conn *nats.Conn
}

var _ substate.ExecutionOperator = (*RemoteOperator)(nil)

// DescribeExecution describes an execution.
func (o *RemoteOperator) DescribeExecution(ctx context.Context, id string) (substate.ExecutionInfo, error) {
	r, err := o.request(ctx, ControlDescribeSubject, OperationCommand{ExecutionID: id})
	if err != nil {
		return substate.ExecutionInfo{}, err
	}
	if r.Execution == nil {
		return substate.ExecutionInfo{}, substate.Errorf(substate.EINTERNAL, "the engine described no execution")
	}
	return *r.Execution, nil
}

// StopExecution stops an execution with the cause.
func (o *RemoteOperator) StopExecution(ctx context.Context, id string, opts substate.StopOptions) error {
	_, err := o.request(ctx, ControlStopSubject, OperationCommand{ExecutionID: id, Cause: opts.Cause})
	return err
}

// RetryExecution redrives a failed execution.
func (o *RemoteOperator) RetryExecution(ctx context.Context, id string) error {
	_, err := o.request(ctx, ControlRetrySubject, OperationCommand{ExecutionID: id})
	return err
}

// RestartExecution starts a new execution with the same input.
func (o *RemoteOperator) RestartExecution(ctx context.Context, id string) (string, error) {
	r, err := o.request(ctx, ControlRestartSubject, OperationCommand{ExecutionID: id})
	return r.NewExecutionID, err
}

func (o *RemoteOperator) request(ctx context.Context, subject string, cmd OperationCommand) (operationReply, error) {
	var r operationReply
	err := controlRequest(ctx, o.Conn, subject, cmd, &r)
	return r, err
}
