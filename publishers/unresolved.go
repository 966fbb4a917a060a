package publishers

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Unresolved is the substate.UnresolvedMemory of the stream
// SUBSTATE_UNRESOLVED (bus.Topology.UnresolvedStreamConfig): one message
// per remembered execution, on its substate.UnresolvedSubject, which the
// stream keeps for its max age. Every worker on the bus shares it, and it
// outlives their restarts.
type Unresolved struct {
	JS jetstream.JetStream
	// Now is the clock of the time written in a message; nil means
	// time.Now.
	Now func() time.Time

	mu     sync.Mutex
	stream jetstream.Stream
}

var _ substate.UnresolvedMemory = (*Unresolved)(nil)

// unresolvedRecord is the body of a message of SUBSTATE_UNRESOLVED, for an
// operator who reads the stream.
type unresolvedRecord struct {
	Provider    substate.Provider `json:"provider"`
	ExecutionID string            `json:"executionId"` // cut to a bounded length
	At          time.Time         `json:"deadLetteredAt"`
}

// Reported reports whether the stream holds a message of the execution.
func (u *Unresolved) Reported(ctx context.Context, p substate.Provider, executionID string) (bool, error) {
	s, err := u.handle(ctx)
	if err != nil {
		return false, err
	}
	_, err = s.GetLastMsgForSubject(ctx, substate.UnresolvedSubject(p, executionID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, substate.WrapError(substate.EUNAVAILABLE, err, "read %s", substate.StreamUnresolved)
	}
	return true, nil
}

// Remember stores a message of the execution, replacing any before it.
func (u *Unresolved) Remember(ctx context.Context, p substate.Provider, executionID string) error {
	now := time.Now
	if u.Now != nil {
		now = u.Now
	}
	body, err := json.Marshal(unresolvedRecord{Provider: p, ExecutionID: substate.Truncate(executionID, 512), At: now().UTC()})
	if err != nil {
		return err
	}
	m := nats.NewMsg(substate.UnresolvedSubject(p, executionID))
	m.Data = body
	if _, err := u.JS.PublishMsg(ctx, m); err != nil {
		return unavailable(err, "remember an execution without tenant")
	}
	return nil
}

// handle returns the stream's handle, looked up once.
func (u *Unresolved) handle(ctx context.Context) (jetstream.Stream, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stream != nil {
		return u.stream, nil
	}
	s, err := u.JS.Stream(ctx, substate.StreamUnresolved)
	if err != nil {
		return nil, substate.WrapError(substate.EUNAVAILABLE, err, "open %s", substate.StreamUnresolved)
	}
	u.stream = s
	return s, nil
}
