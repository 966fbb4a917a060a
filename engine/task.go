package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/jsonx"
)

var timeZero time.Time

// attempt runs the current attempt of a task and computes what follows:
// the next state, a backoff before the next attempt, the catcher, or the
// end of the execution.
func (e *Engine) attempt(ctx context.Context, rec *record, st *state) (*record, error) {
	input, err := jsonx.Decode(rec.Data)
	if err != nil {
		return e.failed(rec, st, taskErrorf(ErrPath, "state input is not JSON: %v", err)), nil
	}
	out, te, err := e.invoke(ctx, rec, st, input)
	if err != nil {
		return nil, err
	}
	if te != nil {
		return e.failed(rec, st, te), nil
	}
	data, err := json.Marshal(mergeOutput(input, out))
	if err != nil {
		return e.failed(rec, st, taskErrorf(ErrInvalidOutput, "encode output: %v", err)), nil
	}
	return moveTo(rec, st.next.name, data), nil
}

// idempotencyKey names one attempt: the same on a resume after a crash,
// different for every attempt and every visit of a state in a loop.
func idempotencyKey(rec *record) string {
	return fmt.Sprintf("%s/%d/%s/%d", rec.ID, rec.Step, rec.State, rec.Attempt)
}

// invoke sends the task request and reads the reply. A TaskError is the
// task's failure; an error means the engine is closing and nothing happened.
func (e *Engine) invoke(ctx context.Context, rec *record, st *state, input any) (any, *TaskError, error) {
	body := input
	if st.params != nil {
		v, err := st.params.resolve(input)
		if err != nil {
			return nil, asTaskError(err), nil
		}
		body = v
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, taskErrorf(ErrPath, "encode parameters: %v", err), nil
	}
	msg := nats.NewMsg(substate.TaskSubject(st.service, st.operation))
	msg.Header.Set(substate.HeaderIdempotencyKey, idempotencyKey(rec))
	msg.Data = data
	timeout := st.timeout
	if timeout <= 0 {
		timeout = e.TaskTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := e.Conn.RequestMsgWithContext(tctx, msg)
	switch {
	case ctx.Err() != nil:
		return nil, nil, ctx.Err()
	case errors.Is(err, nats.ErrNoResponders):
		return nil, taskErrorf(ErrServiceUnavailable, "no task service listens on %s", msg.Subject), nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, taskErrorf(ErrTimeout, "%s.%s did not reply within %s", st.service, st.operation, timeout), nil
	case err != nil:
		return nil, taskErrorf(ErrServiceUnavailable, "request %s: %v", msg.Subject, err), nil
	}
	out, te := decodeReply(resp)
	return out, te, nil
}

func asTaskError(err error) *TaskError {
	var te *TaskError
	if errors.As(err, &te) {
		return te
	}
	return &TaskError{Type: ErrTaskFailed, Message: err.Error()}
}

// decodeReply reads a task reply: a micro error (Nats-Service-Error
// headers), an error object {"errorType":…,"message":…}, or the output.
func decodeReply(msg *nats.Msg) (any, *TaskError) {
	var errBody struct {
		ErrorType string `json:"errorType"`
		Message   string `json:"message"`
	}
	_ = json.Unmarshal(msg.Data, &errBody)
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" || msg.Header.Get(micro.ErrorHeader) != "" {
		te := &TaskError{Type: errBody.ErrorType, Message: errBody.Message}
		if te.Type == "" {
			te.Type = ErrTaskFailed
			if code != "" && strings.Trim(code, "0123456789") != "" {
				te.Type = code
			}
		}
		if te.Message == "" {
			te.Message = msg.Header.Get(micro.ErrorHeader)
		}
		return nil, te
	}
	if errBody.ErrorType != "" {
		return nil, &TaskError{Type: errBody.ErrorType, Message: errBody.Message}
	}
	if len(strings.TrimSpace(string(msg.Data))) == 0 {
		return nil, nil
	}
	out, err := jsonx.Decode(msg.Data)
	if err != nil {
		return nil, taskErrorf(ErrInvalidOutput, "reply is not JSON: %v", err)
	}
	return out, nil
}

// mergeOutput is the next state's input: the task output's fields laid over
// the state input when both are objects, the input when the task replied
// nothing (or null), otherwise the output itself.
func mergeOutput(input, out any) any {
	if out == nil {
		return input
	}
	in, ok1 := input.(map[string]any)
	o, ok2 := out.(map[string]any)
	if !ok1 || !ok2 {
		return out
	}
	merged := make(map[string]any, len(in)+len(o))
	for k, v := range in {
		merged[k] = v
	}
	for k, v := range o {
		merged[k] = v
	}
	return merged
}

// failed handles a failed attempt: it emits error, then retries after a
// backoff, hands the error to a catcher, or fails the execution.
func (e *Engine) failed(rec *record, st *state, te *TaskError) *record {
	now := e.Clock.Now()
	rec.emit(now, substate.EngineError, func(ev *substate.EngineEvent) {
		ev.Attempt, ev.RetryCount = rec.Attempt, rec.Retries
		ev.ErrorType, ev.Error = te.Type, te.Message
	})
	if pol := retryFor(st, te.Type); pol != nil && rec.Attempt-1 < pol.maxAttempts {
		rec.Retries++
		rec.Phase, rec.Deadline = phaseBackoff, now.Add(pol.delay(rec.Attempt, e.Jitter()))
		rec.emit(now, substate.EngineBackingOff, func(ev *substate.EngineEvent) {
			ev.Attempt, ev.RetryCount, ev.NextRetryAt = rec.Attempt, rec.Retries, rec.Deadline
			ev.ErrorType, ev.Error = te.Type, te.Message
		})
		return rec
	}
	if c := catchFor(st, te.Type); c != nil {
		rec.Caught, rec.CaughtData = rec.State, rec.Data
		if !slices.Contains(rec.CaughtTasks, rec.State) {
			rec.CaughtTasks = append(rec.CaughtTasks, rec.State)
		}
		return moveTo(rec, c.next.name, withError(rec.Data, te))
	}
	return e.finish(rec, substate.EngineFailed, te)
}

// withError is the input of a catcher's next state: the failed state's
// input with "error": {"errorType":…,"message":…} set (an input that is not
// an object is replaced by {"error":…}).
func withError(data json.RawMessage, te *TaskError) json.RawMessage {
	in, _ := jsonx.Decode(data)
	obj, ok := in.(map[string]any)
	if !ok {
		obj = map[string]any{}
	}
	obj["error"] = te
	out, err := json.Marshal(obj)
	if err != nil {
		out, _ = json.Marshal(map[string]any{"error": te})
	}
	return out
}
