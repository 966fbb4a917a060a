package consumers_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

// publishRaw puts a message on a raw subject as any NATS client could.
func publishRaw(tb testing.TB, js jetstream.JetStream, kind substate.RawKind, id string, body []byte) {
	tb.Helper()
	m := nats.NewMsg(substate.RawSubject(kind))
	m.Data = body
	if id != "" {
		m.Header.Set(substate.HeaderMsgID, id)
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		tb.Fatal(err)
	}
}

// newBus starts an embedded NATS server with substate's streams.
func newBus(tb testing.TB) *bus.Bus { tb.Helper(); return bustest.Open(tb) }

// streamMsgs returns every message stored in a stream, in order.
func streamMsgs(tb testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	return bustest.Msgs(tb, js, stream)
}

// streamCount returns how many messages a stream holds.
func streamCount(tb testing.TB, js jetstream.JetStream, stream string) uint64 {
	tb.Helper()
	return bustest.Count(tb, js, stream)
}
