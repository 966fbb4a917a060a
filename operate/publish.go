package operate

import (
	"context"

	"github.com/substatehq/substate"
)

// publishResult publishes the provider's status of the executions a
// settled action acted on, when the provider has a poller: a stopped
// execution's with the cause in substate.HeaderStopCause (a provider that
// keeps no cause, Restate, then shows it as the view's error); a failure
// only delays the view until the next poll.
func (s *Service) publishResult(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult) {
	if req.Action == substate.ActionStop {
		if res.Outcome == substate.AuditDone {
			s.publishStop(ctx, res.Provider, res.ExecutionID, stopCause(req))
		}
		return
	}
	s.refresh(ctx, res.Provider, res.ExecutionID, res.NewExecutionID)
}

// refresh publishes the provider's status of the executions acted on, when
// it has a poller; a failure only delays the view until the next poll.
func (s *Service) refresh(ctx context.Context, p substate.Provider, ids ...string) {
	poller := s.Pollers[p]
	if poller == nil || s.Raw == nil {
		return
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		raw, err := poller.Poll(ctx, id, true)
		if err == nil {
			err = s.Raw.PublishRaw(ctx, raw)
		}
		if err != nil {
			s.logger().Warn("status after the action not published; the next poll will show it", "execution", id, "err", err)
		}
	}
}

// publishStop publishes the provider's status of an execution a stop
// ended, with the cause in substate.HeaderStopCause. The raw event's id is
// the status's own with "/stopped" appended, so the stream keeps it beside
// the same status published without the cause.
func (s *Service) publishStop(ctx context.Context, p substate.Provider, id, cause string) {
	poller := s.Pollers[p]
	if poller == nil || s.Raw == nil {
		return
	}
	raw, err := poller.Poll(ctx, id, true)
	if err == nil {
		if raw.Header == nil {
			raw.Header = map[string]string{}
		}
		raw.Header[substate.HeaderStopCause] = cause
		raw.ID += "/stopped"
		err = s.Raw.PublishRaw(ctx, raw)
	}
	if err != nil {
		s.logger().Warn("status after the stop not published; the next poll will show it, without the cause", "execution", id, "err", err)
	}
}
