package actions

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
)

// leaseBusyWait is how long a member whose execution another job holds
// waits before it is tried again.
const leaseBusyWait = 2 * time.Second

// member acts on one member and returns 0 once it has an outcome, or how
// long to wait before trying it again, and whether this counts as a try
// without an answer (throttling and another job's lease do not).
func (j *jobRun) member(ctx context.Context, ln *lane, it item) (time.Duration, bool) {
	m := j.members[it.idx]
	if m.DeadLetter != 0 {
		return j.requeue(ctx, ln, it), true
	}
	req := j.request(it.idx)
	if cause := j.refusedNow(ctx, req, m); cause != nil {
		j.record(ctx, req, m, substate.AuditRefused, cause)
		return 0, false
	}
	held, holder, err := j.r.leases.take(ctx, ln.name, m.ExecutionID, lease{Job: j.rec.ID, Member: req.Member, Tenant: m.TenantID, At: time.Now().UTC()})
	switch {
	case err != nil:
		return j.noAnswer(ctx, it, req, m, err), true
	case !held:
		j.r.logger().Debug("execution leased by another job: waiting", "job", j.rec.ID, "execution", m.ExecutionID, "holder", holder)
		j.noteWaiting(ctx, fmt.Sprintf("waiting for %s, which acts on execution %s", holder, m.ExecutionID))
		return leaseBusyWait, false
	}
	defer j.release(ln.name, m.ExecutionID)
	res, err := j.r.svc.Act(ctx, req)
	switch code := substate.ErrorCode(err); {
	case err == nil:
		ln.answered()
		if res.Outcome == substate.AuditPending {
			j.addPending(req, res)
		}
		return 0, false
	case code == substate.ETHROTTLED:
		d := ln.throttled()
		j.noteWaiting(ctx, ln.waiting())
		return d, false
	default:
		return j.noAnswer(ctx, it, req, m, err), true
	}
}

// request is the request of the job's action on member i.
func (j *jobRun) request(i int) substate.ExecutionRequest {
	m, n := j.members[i], i+1
	req := substate.ExecutionRequest{
		TenantID: m.TenantID, Action: j.rec.Action, Reason: j.rec.Reason, Kill: j.rec.Kill, Who: j.rec.Who,
		ExecutionID: m.ExecutionID, SubState: m.SubState, Job: j.rec.ID, Member: n,
		Intent: func(ctx context.Context, before substate.ExecutionInfo) error {
			return j.r.store.put(ctx, j.rec.ID, partIntent, "", intent{Member: n, Before: before})
		},
	}
	if before, ok := j.intents[n]; ok {
		req.Before = &before
	}
	return req
}

// refusedNow says why the member is refused before any provider call: it
// is outside the tenants of the key that created the job, or the view now
// shows a state the action does not apply to (a member whose execution or
// sub-state changed is left to operate, which records it skipped, as is
// one the job may have acted on before a restart).
func (j *jobRun) refusedNow(ctx context.Context, req substate.ExecutionRequest, m substate.JobMember) error {
	if why := outsideScope(m, j.rec.Scope); why != "" {
		return substate.Errorf(substate.EFORBIDDEN, "%s", why)
	}
	if req.Before != nil {
		return nil
	}
	v, err := j.r.Views.Tenant(ctx, m.TenantID)
	if err != nil || v.WorkflowExecutionID != m.ExecutionID || v.WorkflowSubState != m.SubState {
		return nil
	}
	if why := refusal(j.r.Rules, j.rec.Action, memberOf(v), time.Now()); why != "" {
		return substate.Errorf(substate.ECONFLICT, "%s", why)
	}
	return nil
}

// noAnswer brings back a member whose action got no answer (the provider
// or NATS unreachable), with backoff, until MaxTries; then its outcome is
// recorded as unknown.
func (j *jobRun) noAnswer(ctx context.Context, it item, req substate.ExecutionRequest, m substate.JobMember, err error) time.Duration {
	if ctx.Err() != nil {
		return 0 // the worker stops: the member is tried again when the job resumes
	}
	if it.tries+1 < MaxTries {
		j.r.logger().Warn("fleet job member not acted on yet: trying again", "job", j.rec.ID, "tenant", m.TenantID, "try", it.tries+1, "err", err)
		return j.r.retryDelay(it.tries)
	}
	j.record(ctx, req, m, substate.AuditUnknown, substate.WrapError(substate.ErrorCode(err), err,
		"no answer after %d tries: %s", MaxTries, substate.ErrorMessage(err)))
	return 0
}

// record records a member's outcome the job decided itself, and the error
// it rests on.
func (j *jobRun) record(ctx context.Context, req substate.ExecutionRequest, m substate.JobMember, outcome string, cause error) {
	res := substate.ExecutionResult{Action: req.Action, TenantID: m.TenantID, Provider: m.Provider, ExecutionID: m.ExecutionID,
		Who: req.Who, Reason: req.Reason, Outcome: outcome}
	if _, err := j.r.svc.Record(ctx, req, res, cause); err != nil {
		j.r.logger().Error("fleet job outcome not recorded; the member is acted on again when the job resumes", "job", j.rec.ID, "tenant", m.TenantID, "err", err)
	}
}

// release gives a member's lease back, even as the worker stops.
func (j *jobRun) release(lane, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.r.leases.release(ctx, lane, id); err != nil {
		j.r.logger().Warn("lease not given back; it ends by itself", "job", j.rec.ID, "execution", id, "err", err)
	}
}

// requeue maps a dead letter's raw message again. It needs no intent: a
// requeue publishes events whose ids are derived from the raw message, so
// doing it twice publishes nothing more.
func (j *jobRun) requeue(ctx context.Context, ln *lane, it item) time.Duration {
	m := j.members[it.idx]
	ev := substate.AuditEvent{ID: substate.JobAuditID(j.rec.ID, it.idx+1), Action: substate.ActionRequeue, Who: j.rec.Who,
		Reason: j.rec.Reason, TenantID: m.TenantID, Provider: m.Provider, Job: j.rec.ID, Member: it.idx + 1, DeadLetter: m.DeadLetter}
	why := cmp.Or(outsideScope(m, j.rec.Scope), refusal(nil, substate.ActionRequeue, m, time.Now()))
	if j.r.Requeue == nil {
		why = "this worker cannot requeue dead letters"
	}
	if why != "" {
		return j.audit(ctx, ev, substate.AuditRefused, substate.Errorf(substate.ECONFLICT, "%s", why), "")
	}
	if err := ln.wait(ctx, opRequeue); err != nil {
		return 0
	}
	n, err := j.r.Requeue(ctx, m.RawSeq, j.allow)
	switch code := substate.ErrorCode(err); {
	case err != nil && ctx.Err() != nil:
		return 0 // the worker stops: the member is requeued when the job resumes
	case err == nil:
		return j.audit(ctx, ev, substate.AuditDone, nil, fmt.Sprintf("mapped again: %d events published (events already published are not published twice)", n))
	case code == substate.EUNAVAILABLE || code == substate.EINTERNAL:
		if it.tries+1 < MaxTries {
			return j.r.retryDelay(it.tries)
		}
		return j.audit(ctx, ev, substate.AuditUnknown, err, "")
	default:
		return j.audit(ctx, ev, substate.AuditRefused, err, "")
	}
}

// allow refuses a requeued event of a tenant outside the job's scope.
func (j *jobRun) allow(tenant string) error {
	if why := outsideScope(substate.JobMember{TenantID: tenant}, j.rec.Scope); why != "" {
		return substate.Errorf(substate.EFORBIDDEN, "the dead letter maps to %s: nothing was published", why)
	}
	return nil
}

// audit records a requeue member's outcome.
func (j *jobRun) audit(ctx context.Context, ev substate.AuditEvent, outcome string, err error, detail string) time.Duration {
	ev.Time, ev.Outcome, ev.Detail = time.Now().UTC(), outcome, detail
	if err != nil {
		ev.ErrorCode, ev.Error = substate.ErrorCode(err), substate.ErrorMessage(err)
	}
	if perr := j.r.Audit.PublishAudit(context.WithoutCancel(ctx), ev); perr != nil {
		j.r.logger().Error("fleet job outcome not recorded; trying again", "job", j.rec.ID, "dead_letter", ev.DeadLetter, "err", perr)
		return time.Second
	}
	return 0
}
