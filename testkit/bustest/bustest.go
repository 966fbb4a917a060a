// Package bustest gives tests a real NATS server with JetStream and
// substate's streams, and reads what the streams hold.
package bustest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// Open starts an embedded NATS server with JetStream on a random port, its
// store in a temporary directory, with substate's streams declared in the
// default topology or in topo when given. The bus is connected as the
// worker; Seed and Connect give other clients their identity. It stops
// when the test ends.
func Open(tb testing.TB, topo ...bus.Topology) *bus.Bus {
	tb.Helper()
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	t := bus.DefaultTopology()
	if len(topo) > 0 {
		t = topo[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.EnsureStreams(ctx, b.JetStream); err != nil {
		tb.Fatal(err)
	}
	return b
}

// Seed returns the seed file of an identity of b's embedded server, for a
// command's --nats-nkey or a child process.
func Seed(tb testing.TB, b *bus.Bus, id bus.Identity) string {
	tb.Helper()
	creds, ok := b.Credentials()
	if !ok {
		tb.Fatal("bustest: the bus runs no embedded server")
	}
	return creds.SeedFile(id)
}

// Connect connects to b's embedded server as id, closed on cleanup.
func Connect(tb testing.TB, b *bus.Bus, id bus.Identity) *nats.Conn {
	tb.Helper()
	nc, err := b.ConnectAs(id, "test-"+string(id))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Msgs returns every message a stream holds, in order.
func Msgs(tb testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		} else if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// FeedChange is a change as the change feed stored it.
type FeedChange struct {
	Msg    *jetstream.RawStreamMsg
	Change substate.Change
}

// Changes returns what SUBSTATE_CHANGES holds, in stream order, each
// change with its kind (from its CloudEvents type). A message that is not
// a change fails tb; a message stored twice, or stored before an earlier
// one of its tenant (by sequence, then kind), is an error of tb.
func Changes(tb testing.TB, js jetstream.JetStream) []FeedChange {
	tb.Helper()
	msgs := Msgs(tb, js, substate.StreamChanges)
	out := make([]FeedChange, 0, len(msgs))
	seen := map[string]bool{}
	type position struct {
		seq  uint64
		kind substate.ChangeKind
	}
	last := map[string]position{}
	for _, m := range msgs {
		e, err := substate.UnmarshalChangeEvent(m.Data)
		if err != nil {
			tb.Fatalf("%s message %d: %v", substate.StreamChanges, m.Sequence, err)
		}
		c := e.Data
		switch e.Type {
		case substate.ChangeTypeStuck:
			c.Kind = substate.ChangeStuck
		case substate.ChangeTypeUnstuck:
			c.Kind = substate.ChangeUnstuck
		}
		id := substate.ChangeMsgID(&c)
		if seen[id] || e.ID != id {
			tb.Errorf("change %s (id %s) is in the feed twice, or under another id", id, e.ID)
		}
		seen[id] = true
		at := position{c.Seq, c.Kind}
		if prev, ok := last[c.TenantID]; ok && (at.seq < prev.seq || at.seq == prev.seq && at.kind <= prev.kind) {
			tb.Errorf("tenant %q: change %s after change %d (kind %d)", c.TenantID, id, prev.seq, prev.kind)
		}
		last[c.TenantID] = at
		out = append(out, FeedChange{Msg: m, Change: c})
	}
	return out
}

// Count returns how many messages a stream holds.
func Count(tb testing.TB, js jetstream.JetStream, stream string) uint64 {
	return streamState(tb, js, stream).Msgs
}

// Consumers returns how many consumers a stream has.
func Consumers(tb testing.TB, js jetstream.JetStream, stream string) int {
	return streamState(tb, js, stream).Consumers
}

// streamState reads a stream's state, failing tb when it cannot.
func streamState(tb testing.TB, js jetstream.JetStream, stream string) jetstream.StreamState {
	tb.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State
}
