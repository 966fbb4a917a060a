package actions

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/substatehq/substate"
)

// Preview answers a dry run: the set a job created now would freeze,
// exactly (the same selection at the same view position), which members
// the action would be asked of and which would be refused and why (the
// precondition as the view shows it, a member outside the key's tenants,
// a provider this worker cannot act on, a permission the provider's
// credentials lack), and what the job would cost in each provider's API
// calls and how long that takes under each lane's limits. It changes
// nothing and asks the providers nothing but the permission probes.
func (s *Service) Preview(ctx context.Context, req substate.JobRequest) (substate.JobPreview, error) {
	s.init()
	if err := checkRequest(req); err != nil {
		return substate.JobPreview{}, err
	}
	members, pos, err := s.freeze(ctx, req)
	if err != nil {
		return substate.JobPreview{}, err
	}
	p := substate.JobPreview{Action: req.Action, Filter: req.Filter, Scope: req.Scope, Position: pos, Total: len(members),
		Sample: []substate.JobMember{}, Lanes: []substate.LanePreview{}}
	pv := previewing{s: s, p: &p, action: req.Action, lanes: map[string]*substate.LanePreview{}, reasons: map[string]*substate.JobReason{}}
	for _, m := range members {
		pv.member(m, req.Scope)
	}
	pv.preflight(ctx)
	pv.finish()
	return p, nil
}

// previewing is a dry run being counted.
type previewing struct {
	s       *Service
	p       *substate.JobPreview
	action  substate.ExecutionAction
	lanes   map[string]*substate.LanePreview
	reasons map[string]*substate.JobReason
}

// member counts one member: acted on, or refused with why.
func (pv *previewing) member(m substate.JobMember, scope string) {
	name := m.Lane()
	lp := pv.lanes[name]
	if lp == nil {
		lp = &substate.LanePreview{Lane: name, Concurrency: pv.s.Limits[name].concurrency()}
		pv.lanes[name] = lp
	}
	lp.Members++
	why := cmp.Or(outsideScope(m, scope), pv.s.unknownLane(name), refusal(pv.s.Rules, pv.action, m, pv.s.now()))
	if why != "" {
		lp.WouldRefuse++
		pv.refuse(name, why, m.TenantID, 1)
		return
	}
	lp.WouldAct++
	if len(pv.p.Sample) < sampleSize {
		pv.p.Sample = append(pv.p.Sample, m)
	}
}

// refuse counts n members of a lane refused for why.
func (pv *previewing) refuse(lane, why, tenant string, n int) {
	key := lane + "\x00" + why
	r := pv.reasons[key]
	if r == nil {
		r = &substate.JobReason{Outcome: substate.AuditRefused, Lane: lane, Reason: strings.ReplaceAll(why, tenant, "<id>"), SampleTenantID: tenant}
		pv.reasons[key] = r
	}
	r.Count += n
}

// preflight asks each lane with members to act on what its provider
// would refuse them all for: every one of them is then refused.
func (pv *previewing) preflight(ctx context.Context) {
	for _, name := range slices.Sorted(maps.Keys(pv.lanes)) {
		lp, check := pv.lanes[name], pv.s.Preflight[name]
		if lp.WouldAct == 0 || check == nil {
			continue
		}
		why, err := check(ctx, pv.action)
		switch {
		case err != nil:
			pv.p.Notes = append(pv.p.Notes, fmt.Sprintf("%s: permissions not checked: %s", name, substate.ErrorMessage(err)))
		case why != "":
			pv.refuse(name, why, pv.sampleOf(name), lp.WouldAct)
			lp.WouldRefuse += lp.WouldAct
			lp.WouldAct = 0
			pv.p.Sample = slices.DeleteFunc(pv.p.Sample, func(m substate.JobMember) bool { return m.Lane() == name })
		}
	}
}

// sampleOf is a sampled member of a lane.
func (pv *previewing) sampleOf(lane string) string {
	for _, m := range pv.p.Sample {
		if m.Lane() == lane {
			return m.TenantID
		}
	}
	return ""
}

// finish fills in the lanes' costs and the totals.
func (pv *previewing) finish() {
	for _, name := range slices.Sorted(maps.Keys(pv.lanes)) {
		lp := pv.lanes[name]
		lp.Calls, lp.Seconds = pv.s.cost(name, pv.action, lp.WouldAct)
		pv.p.WouldAct += lp.WouldAct
		pv.p.Seconds = max(pv.p.Seconds, lp.Seconds)
		pv.p.Lanes = append(pv.p.Lanes, *lp)
	}
	pv.p.Reasons = topReasons(pv.reasons, maxReasons)
}

// cost is the provider API calls n members of a lane cost, per API, and
// how long they take under the lane's buckets: an API's calls beyond its
// bucket come at its rate, and the slowest API sets the pace.
func (s *Service) cost(lane string, action substate.ExecutionAction, n int) ([]substate.APICalls, float64) {
	counts := map[string]int{}
	for _, op := range memberOps(action) {
		for _, api := range laneCosts(s.Rules, lane)[op] {
			counts[api] += n
		}
	}
	calls := []substate.APICalls{}
	seconds := 0.0
	for _, api := range slices.Sorted(maps.Keys(counts)) {
		c := substate.APICalls{API: api, Calls: counts[api]}
		if b, ok := s.Limits[lane].bucketOf(api); ok {
			c.Bucket, c.Rate = b.Size, b.Rate
			seconds = max(seconds, float64(max(c.Calls-b.Size, 0))/b.Rate)
		}
		calls = append(calls, c)
	}
	return calls, seconds
}

// memberOps are the operations acting on one member costs at least: the
// description before the action, the action, one read of the state after
// it (more while its effect is not seen), and the poll that publishes the
// execution's status once it is.
func memberOps(action substate.ExecutionAction) []string {
	if action == substate.ActionRequeue {
		return []string{opRequeue}
	}
	return []string{opDescribe, string(action), opDescribe, opPoll}
}

// unknownLane says why a lane's members would be refused when this worker
// cannot act in it, or "".
func (s *Service) unknownLane(name string) string {
	if s.Lanes == nil || slices.Contains(s.Lanes, name) {
		return ""
	}
	if name == substate.LaneDeadLetters {
		return "this worker cannot requeue dead letters"
	}
	return fmt.Sprintf("this worker cannot act on %s executions (no operator is configured for it)", name)
}
