package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Limits of SUBSTATE_UNRESOLVED: how long an execution without tenant is
// remembered after its dead letter (never longer than SUBSTATE_RAW keeps
// the later events it spares a dead letter), and how many are remembered
// at most (the oldest are forgotten first). A forgotten execution's next
// raw event is dead-lettered again, and remembered again.
const (
	UnresolvedTTL = 7 * 24 * time.Hour
	UnresolvedMax = 100_000
)

// UnresolvedStreamConfig is the configuration of SUBSTATE_UNRESOLVED: one
// message for each execution whose tenant no rule resolved and that a dead
// letter reported, on substate.UnresolvedSubject, kept UnresolvedTTL or
// the raw stream's max age when shorter, at most UnresolvedMax. The
// normalizers of every worker share it, so an execution is dead-lettered
// once whichever of them maps its events, and once more only after it is
// forgotten: a later event it spares a dead letter is only in
// SUBSTATE_RAW, so it is not remembered longer than SUBSTATE_RAW keeps
// that event.
func (t Topology) UnresolvedStreamConfig() jetstream.StreamConfig {
	ttl := UnresolvedTTL
	if t.Raw.MaxAge > 0 {
		ttl = min(ttl, t.Raw.MaxAge)
	}
	cfg := t.stream(substate.StreamUnresolved, substate.SubjectUnresolvedPrefix+">", Retention{MaxAge: ttl},
		"executions without tenant already dead-lettered: their later raw events are not dead-lettered again")
	cfg.MaxMsgs = UnresolvedMax
	cfg.MaxMsgsPerSubject = 1
	return cfg
}

// EnsureUnresolvedStream creates SUBSTATE_UNRESOLVED, or updates it when
// its configuration differs.
func (t Topology) EnsureUnresolvedStream(ctx context.Context, js jetstream.JetStream) error {
	return ensureStream(ctx, js, t.UnresolvedStreamConfig())
}
