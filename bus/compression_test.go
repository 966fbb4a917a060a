package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// The retained streams are S2-compressed by default; the dead letters are
// not.
func TestDefaultCompression(t *testing.T) {
	want := map[string]jetstream.StoreCompression{
		substate.StreamRaw: jetstream.S2Compression, substate.StreamEvents: jetstream.S2Compression,
		substate.StreamChanges: jetstream.S2Compression, substate.StreamDLQ: jetstream.NoCompression,
	}
	for _, cfg := range bus.DefaultTopology().StreamConfigs() {
		if got := cfg.Compression; got != want[cfg.Name] {
			t.Errorf("%s: compression %v, want %v", cfg.Name, got, want[cfg.Name])
		}
	}
}

// Turning compression on or off on a stream that holds messages is an
// update the server takes: what was written before stays readable, in
// memory and after a restart from disk, next to what is written after.
func TestChangeCompressionKeepsMessages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *bus.Bus {
		b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	defer func() { b.Close() }()
	var want []string
	var disk, stored int64
	// 9 MB each step: the server seals a message block at 8 MB and
	// compresses a block when it seals it, with the compression the
	// stream had when the block was started; so a change takes effect
	// from the next block on, and the block started under S2 is
	// compressed when the last step seals it.
	for i, c := range []jetstream.StoreCompression{jetstream.NoCompression, jetstream.S2Compression, jetstream.NoCompression} {
		topo := bus.DefaultTopology()
		topo.Compression = c
		if err := topo.EnsureStreams(ctx, b.JetStream); err != nil {
			t.Fatalf("step %d, compression %v: %v", i, c, err)
		}
		s, err := b.JetStream.Stream(ctx, substate.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Compression; got != c {
			t.Fatalf("step %d: stream compression %v, want %v", i, got, c)
		}
		for j := range 9000 {
			body := fmt.Sprintf(`{"step":%d,"n":%d,"pad":%q}`, i, j, strings.Repeat("substate ", 110))
			if _, err := b.JetStream.Publish(ctx, substate.EventsSubject("acme"), []byte(body)); err != nil {
				t.Fatal(err)
			}
			want = append(want, body)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		disk, stored = streamDisk(t, dir, substate.StreamEvents), int64(info.State.Bytes)
		b.Close()
		b = open()
		checkMessages(t, b, want)
	}
	if disk >= stored {
		t.Errorf("the stream takes %d bytes of disk for %d bytes of messages: the block started under S2 was not compressed", disk, stored)
	}
}

// streamDisk returns the bytes of a stream's message blocks in the store.
func streamDisk(t *testing.T, dir, stream string) int64 {
	t.Helper()
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil || len(blocks) == 0 {
		t.Fatalf("no message blocks of %s under %s: %v", stream, dir, err)
	}
	var n int64
	for _, p := range blocks {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// checkMessages reads every message of SUBSTATE_EVENTS by direct get and
// compares it with want.
func checkMessages(t *testing.T, b *bus.Bus, want []string) {
	t.Helper()
	ctx := context.Background()
	s, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != uint64(len(want)) {
		t.Fatalf("the stream holds %d messages, want %d", n, len(want))
	}
	for i, w := range want {
		m, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		if string(m.Data) != w {
			t.Fatalf("message %d = %.60q…, want %.60q…", i+1, m.Data, w)
		}
	}
}
