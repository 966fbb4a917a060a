package publishers

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// Changes publishes tenant view changes on substate.changes.<tenant> as
// core NATS messages: {"seq":…,"tenantId":…,"old":{…},"new":{…}}. Delivery
// is at most once: a subscriber that is away misses them, and so does a
// stream capturing substate.changes.> when the worker dies between its
// commit and the publish. A consumer that must see every transition reads
// them from SUBSTATE_EVENTS.
type Changes struct {
	Conn *nats.Conn
}

var _ substate.ChangePublisher = (*Changes)(nil)

// PublishChanges publishes each change; the connection flushes them in the
// background. A change is encoded with JSON v2, as canonical events are:
// the projector publishes one for every real change.
func (p *Changes) PublishChanges(_ context.Context, changes []substate.Change) error {
	for i := range changes {
		body, err := json.Marshal(&changes[i])
		if err != nil {
			return fmt.Errorf("encode change: %w", err)
		}
		m := nats.NewMsg(substate.ChangesSubject(changes[i].TenantID))
		m.Data = body
		m.Header.Set(substate.HeaderContentType, "application/json")
		if err := p.Conn.PublishMsg(m); err != nil {
			return substate.WrapError(substate.EUNAVAILABLE, err, "publish change")
		}
	}
	return nil
}
