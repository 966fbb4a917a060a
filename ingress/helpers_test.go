package ingress_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/bus"
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

// ensureStreams declares substate's streams on a server the test started.
func ensureStreams(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.DefaultTopology().EnsureStreams(ctx, js); err != nil {
		tb.Fatal(err)
	}
}
