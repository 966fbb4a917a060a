package replay_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/replay"
)

// On a cluster any replica answers a direct get, and one that lags behind
// the leader answers "no messages" for what it has not stored yet. Here
// such a replica answers every other request: every read still yields
// every message, because the leader confirms where a batch says a read
// ends, and Get finds what the lagging replica does not have.
func TestReaderLaggingReplica(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.*"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		subj := "s.a"
		if i%3 == 0 {
			subj = "s.b"
		}
		if _, err := js.Publish(ctx, subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// A client that reaches JetStream through a proxy which answers every
	// other direct get as a replica that stored nothing yet would.
	var lagged atomic.Int64
	pc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	proxy, err := pc.Subscribe("LAG.API.>", func(m *nats.Msg) {
		api := "$JS.API." + strings.TrimPrefix(m.Subject, "LAG.API.")
		if strings.HasPrefix(api, "$JS.API.DIRECT.GET.") && lagged.Add(1)%2 == 1 {
			reply := nats.NewMsg(m.Reply)
			reply.Header.Set("Status", "404")
			reply.Header.Set("Description", "Message Not Found")
			_ = m.RespondMsg(reply)
			return
		}
		_ = pc.PublishRequest(api, m.Reply, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Unsubscribe() })
	_ = pc.Flush()
	lagging, err := jetstream.NewWithAPIPrefix(nc, "LAG.API")
	if err != nil {
		t.Fatal(err)
	}

	r := &replay.Reader{JS: lagging, IdleTimeout: time.Second}
	for i := range 50 {
		var all, a int
		for _, err := range r.Messages(ctx, "S", "", replay.Range{}) {
			if err != nil {
				t.Fatal(err)
			}
			all++
		}
		for _, err := range r.Messages(ctx, "S", "s.a", replay.Range{FromSeq: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			a++
		}
		if all != 40 || a != 26 {
			t.Fatalf("read %d: %d messages, %d on s.a; want 40 and 26", i, all, a)
		}
		if m, err := r.Get(ctx, "S", 7); err != nil || m.Seq != 7 {
			t.Fatalf("get 7: %+v %v", m, err)
		}
	}
	if lagged.Load() < 100 {
		t.Fatalf("%d direct gets went through the lagging replica", lagged.Load())
	}
}
