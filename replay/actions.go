package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// MaxActionsPerPage bounds the operator actions one history page holds.
const MaxActionsPerPage = 10000

// Actions returns the operator actions recorded on SUBSTATE_AUDIT for one
// tenant, its single actions and its fleet jobs' actions, stored in
// [since, until] (zero: unbounded), oldest first; none when the worker
// keeps no audit stream. It holds the oldest MaxActionsPerPage of them;
// cut reports that more were stored in the span.
func (r *Reader) Actions(ctx context.Context, tenant string, since, until time.Time) (acts []substate.AuditEvent, cut bool, err error) {
	out := []substate.AuditEvent{}
	for _, subject := range substate.AuditTenantSubjects(tenant) {
		n := 0 // this subject's, stored oldest first: the rest are newer
		for m, err := range r.Messages(ctx, substate.StreamAudit, subject, Range{Since: since, Until: until}) {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return out, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			var ev substate.AuditEvent
			if json.Unmarshal(m.Data, &ev) != nil || ev.TenantID != tenant {
				continue
			}
			if n == MaxActionsPerPage {
				cut = true
				break
			}
			out, n = append(out, ev), n+1
		}
	}
	slices.SortStableFunc(out, func(a, b substate.AuditEvent) int { return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.ID, b.ID)) })
	if len(out) > MaxActionsPerPage {
		out, cut = out[:MaxActionsPerPage], true
	}
	return out, cut, nil
}
