package actions

import (
	"context"
	"strconv"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

// deadLetters returns the dead letters f selects, as members, and the
// last SUBSTATE_DLQ sequence they were read up to.
func (s *Service) deadLetters(ctx context.Context, f substate.DeadLetterFilter) ([]substate.JobMember, uint64, error) {
	r := s.store.reader
	_, last, n, err := r.Bounds(ctx, substate.StreamDLQ)
	if err != nil || n == 0 {
		return []substate.JobMember{}, last, err
	}
	out := []substate.JobMember{}
	rg := replay.Range{ToSeq: last, Since: f.Since, Until: f.Until}
	for m, err := range r.Messages(ctx, substate.StreamDLQ, "", rg) {
		if err != nil {
			return nil, 0, err
		}
		d, ok := deadLetterMember(m, f)
		if !ok {
			continue
		}
		if len(out) == substate.MaxJobMembers {
			return nil, 0, substate.Errorf(substate.EINVALID, "the filter matches more than %d dead letters: narrow it (a stage, a reason, a time range)", substate.MaxJobMembers)
		}
		out = append(out, d)
	}
	return out, last, nil
}

// deadLetterMember is a dead letter as a member, when f selects it.
func deadLetterMember(m replay.Message, f substate.DeadLetterFilter) (substate.JobMember, bool) {
	h := m.Header
	d := substate.JobMember{DeadLetter: m.Seq, TenantID: replay.DeadLetterTenant(m.Data)}
	if subject := h.Get(substate.HeaderDLQSubject); strings.HasPrefix(subject, substate.SubjectRawPrefix) {
		d.RawSeq, _ = strconv.ParseUint(h.Get(substate.HeaderDLQSeq), 10, 64)
		d.Provider = substate.RawKind(strings.TrimPrefix(subject, substate.SubjectRawPrefix)).Provider()
	}
	ok := (f.Stage == "" || h.Get(substate.HeaderDLQStage) == f.Stage) &&
		(f.Reason == "" || strings.Contains(h.Get(substate.HeaderDLQReason), f.Reason)) &&
		strings.HasPrefix(d.TenantID, f.TenantPrefix) && (f.TenantPrefix == "" || d.TenantID != "")
	return d, ok
}
