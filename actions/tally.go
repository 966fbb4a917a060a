package actions

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

// rateWindow is the window a job's rate is measured over.
const rateWindow = time.Minute

// tally folds a job's audit events, in stream order, into each member's
// outcome: the last event of a member is its outcome (a follow-up event
// settles a pending one). It is the only source of a job's progress and
// report, so both say what SUBSTATE_AUDIT holds.
type tally struct {
	mu      sync.Mutex
	job     string
	seq     uint64 // last SUBSTATE_AUDIT sequence folded
	members map[int]substate.AuditEvent
	times   []time.Time // when outcomes were recorded, oldest first
	first   time.Time
	last    time.Time
}

func newTally(job string) *tally {
	return &tally{job: job, members: map[int]substate.AuditEvent{}}
}

// refresh folds the job's audit events recorded since the last refresh.
func (t *tally) refresh(ctx context.Context, r *replay.Reader) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rg := replay.Range{FromSeq: t.seq + 1}
	for m, err := range r.Messages(ctx, substate.StreamAudit, substate.AuditJobSubject(t.job), rg) {
		if err != nil {
			return err
		}
		t.seq = m.Seq
		var ev substate.AuditEvent
		if json.Unmarshal(m.Data, &ev) != nil || ev.Job != t.job || ev.Member < 1 {
			continue
		}
		t.add(ev)
	}
	return nil
}

// add folds one event. Called with t.mu held.
func (t *tally) add(ev substate.AuditEvent) {
	if _, seen := t.members[ev.Member]; !seen {
		i, _ := slices.BinarySearchFunc(t.times, ev.Time, func(a, b time.Time) int { return a.Compare(b) })
		t.times = slices.Insert(t.times, i, ev.Time)
	}
	t.members[ev.Member] = ev
	if t.first.IsZero() || ev.Time.Before(t.first) {
		t.first = ev.Time
	}
	if ev.Time.After(t.last) {
		t.last = ev.Time
	}
}

// outcomes returns each member's last event.
func (t *tally) outcomes() map[int]substate.AuditEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.members)
}

// progress counts the outcomes of a job of total members, with the rate
// over the last minute before now and the time left at it.
func (t *tally) progress(total int, now time.Time) substate.JobProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := substate.JobProgress{Total: total, StartedAt: t.first, UpdatedAt: t.last}
	for _, ev := range t.members {
		switch ev.Outcome {
		case substate.AuditDone:
			p.Done++
		case substate.AuditPending:
			p.Pending++
		case substate.AuditRefused:
			p.Refused++
		case substate.AuditUnknown:
			p.Unknown++
		case substate.AuditSkipped:
			p.Skipped++
		}
	}
	p.Remaining = max(total-len(t.members), 0)
	p.Rate = t.rate(now)
	if p.Rate > 0 && p.Remaining > 0 {
		p.ETASeconds = float64(p.Remaining) / p.Rate
	}
	return p
}

// rate is outcomes a second over the window before now (or since the
// first outcome, when that is nearer). Called with t.mu held.
func (t *tally) rate(now time.Time) float64 {
	if len(t.times) == 0 {
		return 0
	}
	from := now.Add(-rateWindow)
	i, _ := slices.BinarySearchFunc(t.times, from, func(a, b time.Time) int { return a.Compare(b) })
	n := len(t.times) - i
	if t.times[0].After(from) {
		from = t.times[0]
	}
	span := now.Sub(from)
	if n == 0 || span <= 0 {
		return 0
	}
	return float64(n) / max(span.Seconds(), 1)
}

// reasons are the most frequent reasons of the members not done, at most
// limit of them.
func (t *tally) reasons(limit int) []substate.JobReason {
	t.mu.Lock()
	defer t.mu.Unlock()
	byKey := map[string]*substate.JobReason{}
	for _, ev := range t.members {
		if ev.Outcome == substate.AuditDone {
			continue
		}
		r := substate.JobReason{Outcome: ev.Outcome, Lane: laneOf(ev), Reason: reasonText(ev)}
		key := r.Outcome + "\x00" + r.Lane + "\x00" + r.Reason
		if byKey[key] == nil {
			r.SampleTenantID = ev.TenantID
			byKey[key] = &r
		}
		byKey[key].Count++
	}
	return topReasons(byKey, limit)
}

// topReasons sorts reasons by count, most first, and keeps limit.
func topReasons(byKey map[string]*substate.JobReason, limit int) []substate.JobReason {
	out := make([]substate.JobReason, 0, len(byKey))
	for _, r := range byKey {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b substate.JobReason) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Outcome, b.Outcome), strings.Compare(a.Reason, b.Reason))
	})
	return out[:min(len(out), limit)]
}

// laneOf is the lane of an audited member.
func laneOf(ev substate.AuditEvent) string {
	if ev.DeadLetter != 0 {
		return substate.LaneDeadLetters
	}
	return string(ev.Provider)
}

// reasonText is what an event says of why a member was not done, with the
// member's own ids taken out so that members refused for one reason count
// together.
func reasonText(ev substate.AuditEvent) string {
	why := cmp.Or(ev.Error, ev.Detail, ev.Outcome)
	for _, id := range []string{ev.ExecutionID, ev.TenantID} {
		if id != "" {
			why = strings.ReplaceAll(why, id, "<id>")
		}
	}
	return substate.Truncate(why, 300)
}
