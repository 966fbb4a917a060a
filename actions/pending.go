package actions

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/operate"
)

// addPending keeps a member whose action is pending, to re-check it.
func (j *jobRun) addPending(req substate.ExecutionRequest, res substate.ExecutionResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending[req.Member] = pendingAction{req: req, res: res, since: time.Now()}
}

// resumePending takes up the members whose last outcome is pending, as
// their audit events and intents describe them.
func (j *jobRun) resumePending(outcomes map[int]substate.AuditEvent) {
	for n, ev := range outcomes {
		if ev.Outcome != substate.AuditPending || ev.Settles != "" {
			continue // settled, or given up on
		}
		req := j.request(n - 1)
		res := substate.ExecutionResult{Action: ev.Action, TenantID: ev.TenantID, Provider: ev.Provider, ExecutionID: ev.ExecutionID,
			NewExecutionID: ev.NewExecutionID, Who: ev.Who, Reason: ev.Reason, At: ev.Time, AuditID: ev.ID, Outcome: ev.Outcome}
		if req.Before != nil {
			res.Execution = *req.Before
		}
		j.pending[n] = pendingAction{req: req, res: res, since: ev.Time}
	}
}

// settle re-checks the pending members every operate.WatchEvery until
// their outcome is known (recorded by a follow-up audit event), and gives
// up on those still pending after the runner's Watch, recording that too.
// A cancelled job stops checking: its pending members stay pending.
func (j *jobRun) settle(ctx context.Context) {
	watch := j.r.Watch
	if watch <= 0 {
		watch = operate.DefaultWatch
	}
	for j.pendingCount() > 0 && !j.cancelled.Load() {
		if err := timex.Sleep(ctx, min(operate.WatchEvery, watch)); err != nil {
			return
		}
		j.mu.Lock()
		pending := maps.Clone(j.pending)
		j.mu.Unlock()
		j.recheckAll(ctx, pending, watch)
	}
}

// recheckAll re-checks pending members, as many at once as their lane's
// concurrency, and forgets those no longer pending.
func (j *jobRun) recheckAll(ctx context.Context, pending map[int]pendingAction, watch time.Duration) {
	var wg sync.WaitGroup
	slots := map[string]chan struct{}{}
	for _, n := range slices.Sorted(maps.Keys(pending)) {
		lane := j.members[n-1].Lane()
		if slots[lane] == nil {
			slots[lane] = make(chan struct{}, j.r.lane(lane).limits.concurrency())
		}
		slot := slots[lane]
		slot <- struct{}{}
		wg.Go(func() {
			defer func() { <-slot }()
			if j.recheck(ctx, pending[n], watch) {
				j.mu.Lock()
				delete(j.pending, n)
				j.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// recheck reads a pending member's state again and reports whether it is
// no longer pending (settled, or given up on after watch).
func (j *jobRun) recheck(ctx context.Context, p pendingAction, watch time.Duration) bool {
	got, err := j.r.svc.Recheck(ctx, p.res, p.req)
	if got.Outcome != substate.AuditPending {
		return err == nil || substate.ErrorCode(err) != substate.EUNAVAILABLE
	}
	if time.Since(p.since) < watch {
		return false
	}
	if err := j.r.svc.GiveUp(ctx, p.req, p.res); err != nil {
		j.r.logger().Warn("pending member not given up on yet", "job", j.rec.ID, "tenant", p.req.TenantID, "err", err)
		return false
	}
	return true
}

func (j *jobRun) pendingCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending)
}
