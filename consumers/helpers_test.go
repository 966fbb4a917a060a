package consumers_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/bustest"
)

// restartable is a NATS server the test can stop and start again on the
// same port and store, to see what the pipeline does while NATS is away.
type restartable struct {
	tb   testing.TB
	opts server.Options
	srv  *server.Server
}

func newRestartable(tb testing.TB) *restartable {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &restartable{tb: tb, opts: server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: tb.TempDir(), NoSigs: true, NoLog: true}}
	r.start()
	tb.Cleanup(r.stop)
	return r
}

func (r *restartable) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.opts.Port) }

func (r *restartable) start() {
	r.tb.Helper()
	opts := r.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		r.tb.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		r.tb.Fatal("nats server did not start")
	}
	r.srv = srv
}

func (r *restartable) stop() {
	if r.srv != nil {
		r.srv.Shutdown()
		r.srv.WaitForShutdown()
		r.srv = nil
	}
}

// waitFor polls cond until it holds or ten seconds pass.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

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

// ensureStreams declares substate's streams on a server the test started.
func ensureStreams(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.DefaultTopology().EnsureStreams(ctx, js); err != nil {
		tb.Fatal(err)
	}
}
