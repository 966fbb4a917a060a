package consumers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// reject dead-letters a raw message the mapping refused.
//
// A message about one execution whose tenant no rule resolves (a
// *substate.UnresolvedTenant) is dead-lettered only when Unresolved does
// not remember that execution: an invocation of a keyless Restate service
// publishes a row at every change, and without a rule that can place it
// each would be another dead letter. The first one's id is the
// execution's, so replicas that refuse two of its messages at once store
// one dead letter; Unresolved remembers the execution once that dead
// letter is stored. A later message of a remembered execution is
// acknowledged, counted and logged at debug: SUBSTATE_RAW keeps it, and
// renormalize maps it once a rule resolves the execution. When Unresolved
// cannot answer, the message is dead-lettered: a second dead letter is
// better than none.
func (n *Normalizer) reject(ctx context.Context, msg jetstream.Msg, err error) {
	var u *substate.UnresolvedTenant
	if n.Unresolved == nil || !errors.As(err, &u) {
		n.dlq.deadLetter(ctx, msg, err)
		return
	}
	reported, lerr := n.Unresolved.Reported(ctx, u.Provider, u.ExecutionID)
	if lerr != nil {
		n.logger().Warn("cannot tell whether an execution without tenant was dead-lettered; dead-lettering it", "execution", u.ExecutionID, "err", lerr)
		reported = false
	}
	if reported {
		n.Metrics.countUnresolvedRepeat(u.Provider)
		n.logger().Debug("no tenant for an execution already dead-lettered; kept in the raw stream only",
			"provider", string(u.Provider), "execution", u.ExecutionID, "subject", msg.Subject())
		n.dlq.ack(msg)
		return
	}
	err = fmt.Errorf("%w; its later events are kept in %s without a dead letter of their own (substate renormalize maps them once a tenant rule resolves it)", err, substate.StreamRaw)
	if !n.dlq.storeOrNak(ctx, msg, err, unresolvedLetterID(u)) {
		return
	}
	if rerr := n.Unresolved.Remember(ctx, u.Provider, u.ExecutionID); rerr != nil {
		n.logger().Warn("cannot remember an execution without tenant; its next event is dead-lettered again", "execution", u.ExecutionID, "err", rerr)
	}
	n.dlq.ack(msg)
}

// unresolvedLetterID is the dead-letter id of an execution without
// tenant: its provider and a hash of its id, which may be any length.
func unresolvedLetterID(u *substate.UnresolvedTenant) string {
	sum := sha256.Sum256([]byte(u.ExecutionID))
	return "normalize-unresolved-" + string(u.Provider) + "-" + hex.EncodeToString(sum[:16])
}
