package bus_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

func openBus(tb testing.TB) *bus.Bus {
	tb.Helper()
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func TestOpenEmbedded(t *testing.T) {
	b := openBus(t)
	if !b.Embedded() || !b.Ready() || b.ClientURL() == "" {
		t.Fatalf("embedded %v ready %v url %q", b.Embedded(), b.Ready(), b.ClientURL())
	}
	// Another client can connect to the embedded server, as the worker.
	creds, ok := b.Credentials()
	if !ok {
		t.Fatal("no credentials for the embedded server")
	}
	other, err := bus.Open(bus.Config{URL: b.ClientURL(), NkeyFile: creds.SeedFile(bus.Worker)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Embedded() || !other.Ready() {
		t.Fatalf("remote bus: embedded %v ready %v", other.Embedded(), other.Ready())
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  bus.Config
	}{
		{"ErrBadListen", bus.Config{Listen: "nowhere", StoreDir: t.TempDir()}},
		{"ErrBadSync", bus.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Sync: "sometimes"}},
		{"ErrUnreachableURL", bus.Config{URL: "nats://127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := bus.Open(tc.cfg); err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

// A port something else listens on fails Open at once, and says so.
func TestOpenPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := bus.Open(bus.Config{Listen: l.Addr().String(), StoreDir: t.TempDir()})
	if err == nil {
		b.Close()
		t.Fatal("Open succeeded on a port in use")
	}
	if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("error %q does not say the address is in use", err)
	}
}

func TestEnsureStreamsIdempotent(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	topo := bus.DefaultTopology()
	for range 2 {
		if err := topo.EnsureStreams(ctx, b.JetStream); err != nil {
			t.Fatal(err)
		}
	}
	// A changed retention is applied to the existing stream.
	topo.Raw.MaxAge, topo.Duplicates = time.Hour, 24*time.Hour
	if err := topo.EnsureStreams(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != time.Hour || cfg.Duplicates != time.Hour {
		t.Fatalf("raw stream max age %s duplicates %s, want 1h each (window capped by age)", cfg.MaxAge, cfg.Duplicates)
	}
	for _, name := range []string{substate.StreamRaw, substate.StreamEvents, substate.StreamDLQ} {
		if _, err := b.JetStream.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
}

// TestEnsureAuditStream: the audit trail keeps every action, whatever the
// other streams' retention, and is put back when someone limits it.
func TestEnsureAuditStream(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	topo := bus.DefaultTopology()
	topo.Raw.MaxAge, topo.Events.MaxAge = time.Hour, time.Hour
	if err := topo.EnsureAuditStream(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	limited := topo.AuditStreamConfig()
	limited.MaxAge, limited.MaxBytes = time.Hour, 1<<20
	if _, err := b.JetStream.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	if err := topo.EnsureAuditStream(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream.Stream(ctx, substate.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != 0 || cfg.MaxBytes != -1 || cfg.MaxMsgs != -1 || cfg.Duplicates != topo.Duplicates ||
		len(cfg.Subjects) != 1 || cfg.Subjects[0] != substate.SubjectAuditPrefix+">" {
		t.Fatalf("audit stream %+v, want no limit, duplicates %s, on %s>", cfg, topo.Duplicates, substate.SubjectAuditPrefix)
	}
}

func TestConsumerFrom(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	if err := bus.DefaultTopology().EnsureStreams(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.JetStream.Publish(ctx, substate.EventsSubject("t"), []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := bus.ConsumerConfig(bus.ProjectorConsumer("a"), time.Second, 1)
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	ackAll(t, c, 5)

	t.Run("KeepsPositionWhenViewIsCurrent", func(t *testing.T) {
		c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := c.Info(ctx); info.NumPending != 0 || info.AckFloor.Stream != 5 {
			t.Fatalf("pending %d ack floor %d, want 0 and 5", info.NumPending, info.AckFloor.Stream)
		}
	})
	t.Run("RewindsToAViewBehindIt", func(t *testing.T) {
		c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, cfg, 2)
		if err != nil {
			t.Fatal(err)
		}
		msgs := fetch(t, c, 3)
		if got := seq(t, msgs[0]); got != 3 {
			t.Fatalf("first redelivered sequence = %d, want 3", got)
		}
	})
	// A consumer made with explicit acks (as before cumulative ones) is
	// recreated after the checkpoint: the server cannot change its policy.
	t.Run("RecreatesOnAnotherAckPolicy", func(t *testing.T) {
		ackAll(t, c, 5)
		c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("a", time.Second, 1), 4)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.AckPolicy != jetstream.AckAllPolicy || info.NumPending != 1 {
			t.Fatalf("ack policy %v with %d pending, want AckAll from sequence 5", info.Config.AckPolicy, info.NumPending)
		}
	})
}

func TestProjectorConsumerName(t *testing.T) {
	if got := bus.ProjectorConsumer(""); got != "substate-projector" {
		t.Errorf("default = %q", got)
	}
	if got := bus.ProjectorConsumer("pod.1"); got != "substate-projector-pod~2E1" {
		t.Errorf("encoded = %q", got)
	}
}

func fetch(tb testing.TB, c jetstream.Consumer, n int) []jetstream.Msg {
	tb.Helper()
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	if len(out) != n {
		tb.Fatalf("fetched %d messages, want %d", len(out), n)
	}
	return out
}

func ackAll(tb testing.TB, c jetstream.Consumer, n int) {
	tb.Helper()
	for _, m := range fetch(tb, c, n) {
		if err := m.DoubleAck(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
}

func seq(tb testing.TB, m jetstream.Msg) uint64 {
	tb.Helper()
	meta, err := m.Metadata()
	if err != nil {
		tb.Fatal(err)
	}
	return meta.Sequence.Stream
}
