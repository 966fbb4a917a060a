package actions

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/substatehq/substate"
)

// jobRun is one job running on a runner.
type jobRun struct {
	r       *Runner
	rec     record
	members []substate.JobMember
	intents map[int]substate.ExecutionInfo

	paused    atomic.Bool
	cancelled atomic.Bool

	mu      sync.Mutex
	pending map[int]pendingAction
	noted   time.Time // when the job last noted why it waits
}

// noteWaiting notes on the job's state why it waits, at most every
// waitingNoteEvery.
func (j *jobRun) noteWaiting(ctx context.Context, why string) {
	j.mu.Lock()
	if time.Since(j.noted) < waitingNoteEvery {
		j.mu.Unlock()
		return
	}
	j.noted = time.Now()
	j.mu.Unlock()
	_ = j.r.store.put(ctx, j.rec.ID, partState, "", stateMark{State: substate.JobRunning, Worker: j.r.Worker, At: time.Now().UTC(), Waiting: why})
}

// pendingAction is a member the provider accepted the action for whose
// effect is not seen yet.
type pendingAction struct {
	req   substate.ExecutionRequest
	res   substate.ExecutionResult
	since time.Time
}

// runJob runs a job from where its record and SUBSTATE_AUDIT say it is:
// the members without an outcome are acted on, those whose action may
// have been asked just before a restart are decided from the provider's
// state, the pending ones are re-checked; it returns once every member
// has an outcome (or the job was cancelled) and the job is marked so, or
// with an error when the job must be taken up again.
func (r *Runner) runJob(ctx context.Context, rec record) error {
	state, _, err := r.store.status(ctx, rec.ID)
	if err != nil || state.Final() {
		return err
	}
	j := &jobRun{r: r, rec: rec, pending: map[int]pendingAction{}}
	t := newTally(rec.ID)
	if j.members, err = r.store.members(ctx, rec); err == nil {
		if err = t.refresh(ctx, r.store.reader); err == nil {
			j.intents, err = r.store.intents(ctx, rec.ID)
		}
	}
	if err != nil {
		return fmt.Errorf("resume job %s: %w", rec.ID, err)
	}
	outcomes := t.outcomes()
	if err := r.store.put(ctx, rec.ID, partState, "", stateMark{State: substate.JobRunning, Worker: r.Worker, At: time.Now().UTC()}); err != nil {
		return err
	}
	r.logger().Info("fleet job running", "job", rec.ID, "members", rec.Total, "with_outcome", len(outcomes), "in_doubt", len(j.intents))
	go j.watchControls(ctx)
	j.readControl(ctx)
	j.resumePending(outcomes)
	j.actAll(ctx, outcomes)
	j.settle(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return j.end(ctx)
}

// end marks the job done, or cancelled when it was.
func (j *jobRun) end(ctx context.Context) error {
	final := substate.JobDone
	if j.cancelled.Load() {
		final = substate.JobCancelled
	}
	if err := j.r.store.put(ctx, j.rec.ID, partState, "", stateMark{State: final, Worker: j.r.Worker, At: time.Now().UTC()}); err != nil {
		return err
	}
	j.r.logger().Info("fleet job ended", "job", j.rec.ID, "state", final)
	return nil
}

// watchControls reads the job's last control every ControlEvery.
func (j *jobRun) watchControls(ctx context.Context) {
	t := time.NewTicker(ControlEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			j.readControl(ctx)
		}
	}
}

// readControl applies the job's last control.
func (j *jobRun) readControl(ctx context.Context) {
	var c control
	ok, err := j.r.store.last(ctx, j.rec.ID, partControl, &c)
	if err != nil || !ok {
		return
	}
	j.paused.Store(c.Op == substate.JobPause)
	if c.Op == substate.JobCancel && !j.cancelled.Swap(true) {
		j.r.logger().Info("fleet job cancelled: no member is acted on from now", "job", j.rec.ID, "who", c.Who)
	}
}

// actAll acts on every member without an outcome, each lane with its own
// workers, until every one has an outcome or the job stops.
func (j *jobRun) actAll(ctx context.Context, outcomes map[int]substate.AuditEvent) {
	byLane := map[string][]int{}
	for i, m := range j.members {
		if _, ok := outcomes[i+1]; !ok {
			byLane[m.Lane()] = append(byLane[m.Lane()], i)
		}
	}
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(byLane)) {
		ln := j.r.lane(name)
		q := newQueue(byLane[name], j.cancelled.Load)
		for range ln.limits.concurrency() {
			wg.Go(func() { j.work(ctx, ln, q) })
		}
	}
	wg.Wait()
}

// work acts on the lane's members one after another.
func (j *jobRun) work(ctx context.Context, ln *lane, q *queue) {
	for {
		it, ok := q.next(ctx, j.paused.Load)
		if !ok {
			return
		}
		again, tried := j.member(ctx, ln, it)
		if again > 0 {
			if tried {
				it.tries++
			}
			it.notBefore = time.Now().Add(again)
			q.put(it)
			continue
		}
		q.done()
	}
}

// lane returns a lane by name; a lane without limits gets one of its own.
func (r *Runner) lane(name string) *lane {
	if ln := r.lanes[name]; ln != nil {
		return ln
	}
	return newLane(name, Limits{Concurrency: 1}, laneCosts(r.Rules, name), r.Throttle)
}
