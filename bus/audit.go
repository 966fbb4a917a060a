package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// AuditStreamConfig is the configuration of SUBSTATE_AUDIT, the record of
// every action an operator took on an execution (substate.audit.<action>.<tenant>).
// It is kept without an age or size limit: it is small (one message per
// action) and an audit trail that expires is not one.
func (t Topology) AuditStreamConfig() jetstream.StreamConfig {
	cfg := t.stream(substate.StreamAudit, substate.SubjectAuditPrefix+">", Retention{},
		"actions taken on executions (stop, retry, restart): who, why, on what, and how it ended")
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = DefaultTopology().Duplicates
	}
	return cfg
}

// EnsureAuditStream creates SUBSTATE_AUDIT, or updates it when its
// configuration differs.
func (t Topology) EnsureAuditStream(ctx context.Context, js jetstream.JetStream) error {
	return ensureStream(ctx, js, t.AuditStreamConfig())
}
