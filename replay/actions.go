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
// [since, until] (zero: unbounded), oldest first, at most
// MaxActionsPerPage; none when the worker keeps no audit stream.
func (r *Reader) Actions(ctx context.Context, tenant string, since, until time.Time) ([]substate.AuditEvent, error) {
	out := []substate.AuditEvent{}
	for _, subject := range substate.AuditTenantSubjects(tenant) {
		for m, err := range r.Messages(ctx, substate.StreamAudit, subject, Range{Since: since, Until: until}) {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			var ev substate.AuditEvent
			if json.Unmarshal(m.Data, &ev) == nil && ev.TenantID == tenant && len(out) < MaxActionsPerPage {
				out = append(out, ev)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b substate.AuditEvent) int { return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}
