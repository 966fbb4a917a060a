package publishers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

var _ substate.AuditPublisher = (*JetStream)(nil)

// PublishAudit publishes an audit event as JSON on
// its Subject (stream SUBSTATE_AUDIT), with its id as
// Nats-Msg-Id, and returns once it is stored.
func (p *JetStream) PublishAudit(ctx context.Context, ev substate.AuditEvent) error {
	if ev.ID == "" {
		return substate.Errorf(substate.EINVALID, "audit event has no id")
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode audit event: %w", err)
	}
	m := nats.NewMsg(ev.Subject())
	m.Data = data
	m.Header.Set(substate.HeaderMsgID, ev.ID)
	m.Header.Set(substate.HeaderContentType, "application/json")
	if _, err := p.JS.PublishMsg(ctx, m); err != nil {
		return unavailable(err, "publish audit event")
	}
	return nil
}
