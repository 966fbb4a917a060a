package operate

import (
	"context"
	"sync"
	"time"

	"github.com/substatehq/substate"
)

// watcher re-checks pending actions in the background until their outcome
// is known or the Service's Watch passes, and records it (Recheck). Close
// ends the watches.
type watcher struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start watches one pending action.
func (w *watcher) start(s *Service, req substate.ExecutionRequest, res substate.ExecutionResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	}
	if w.ctx.Err() != nil {
		return // closed
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s.follow(w.ctx, req, res)
	}()
}

// close ends the watches and waits for them.
func (w *watcher) close() {
	w.mu.Lock()
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	}
	w.cancel()
	w.mu.Unlock()
	w.wg.Wait()
}

// follow re-checks a pending action every Every until its outcome is
// known, and records it; after Watch, it records that the action is still
// pending and that substate stopped checking.
func (s *Service) follow(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult) {
	ctx, cancel := context.WithTimeout(ctx, s.watchFor())
	defer cancel()
	t := time.NewTicker(s.every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				s.giveUp(req, res)
			}
			return
		case <-t.C:
		}
		got, err := s.Recheck(ctx, res, req)
		if got.Outcome != substate.AuditPending {
			return
		}
		if err != nil {
			s.logger().Warn("pending action not re-checked", "action", res.Action, "execution", res.ExecutionID, "err", err)
		}
	}
}

// giveUp records that a pending action's effect was not seen within Watch.
func (s *Service) giveUp(req substate.ExecutionRequest, res substate.ExecutionResult) {
	ctx, cancel := context.WithTimeout(context.Background(), ActionTimeout)
	defer cancel()
	if err := s.GiveUp(ctx, req, res); err != nil {
		s.logger().Error("audit event not recorded", "action", req.Action, "tenant", req.TenantID, "err", err)
	}
}

// GiveUp records, in a follow-up audit event, that a pending action's
// effect was not seen within Watch and that substate stopped checking: a
// fleet job calls it for its members still pending when it ends.
func (s *Service) GiveUp(ctx context.Context, req substate.ExecutionRequest, res substate.ExecutionResult) error {
	settles := res.AuditID
	res.At = s.now()
	res.Next = "still not effective after " + s.watchFor().String() + ": substate stopped checking; describe the execution to see its state"
	ev := s.auditEvent(req, res, nil)
	ev.Settles = settles
	if req.Job != "" {
		ev.ID += ".unsettled"
	}
	if err := s.Audit.PublishAudit(ctx, ev); err != nil {
		return err
	}
	s.logger().Warn("pending action not effective; no longer checked", "action", res.Action, "tenant", res.TenantID, "execution", res.ExecutionID, "watched", s.watchFor())
	return nil
}

// Close stops re-checking pending actions and waits for the checks under
// way. An action still pending then keeps its pending audit event.
func (s *Service) Close() error {
	s.watch.close()
	return nil
}
