package faults_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate/testkit/faults"
)

// What a NATS client sees of a frozen server: it stays connected, as far
// as it knows, and a ping gets no answer; once thawed, it answers again
// on the same connection.
func TestProxyFreeze(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	p := faults.NewProxy(t, ns.Addr().String())
	nc, err := nats.Connect("nats://" + p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	p.Freeze()
	if err := nc.FlushTimeout(300 * time.Millisecond); err == nil {
		t.Fatal("a frozen server answered a ping")
	}
	if !nc.IsConnected() {
		t.Fatal("the client noticed the freeze by itself")
	}
	p.Thaw()
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("ping after the thaw: %v", err)
	}
}
