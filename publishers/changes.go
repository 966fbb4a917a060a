package publishers

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// Changes publishes tenant view changes as core NATS messages, the same
// messages ChangeFeed stores (ChangeMsg), without waiting for a stream:
// delivery is at most once. The worker publishes through the view's
// outbox and ChangeFeed instead; Changes serves a projector embedded
// without an outbox.
type Changes struct {
	Conn *nats.Conn
	// SchemaBase is the worker's base URL (see ChangeFeed.SchemaBase).
	SchemaBase string
}

var _ substate.ChangePublisher = (*Changes)(nil)

// PublishChanges publishes each change; the connection flushes them in the
// background.
func (p *Changes) PublishChanges(_ context.Context, changes []substate.Change) error {
	for i := range changes {
		m, err := ChangeMsg(&changes[i], p.SchemaBase)
		if err != nil {
			return err
		}
		if err := p.Conn.PublishMsg(m); err != nil {
			return substate.WrapError(substate.EUNAVAILABLE, err, "publish change")
		}
	}
	return nil
}
