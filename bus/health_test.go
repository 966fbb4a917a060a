package bus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/faults"
)

// fullStore opens an embedded bus on a small tmpfs, fills the disk until
// SUBSTATE_RAW fails a write, and returns the bus and the file to remove
// to free the space again.
func fullStore(t *testing.T) (*Bus, string) {
	t.Helper()
	dir := faults.Tmpfs(t, 16<<20)
	b, err := Open(Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := DefaultTopology().EnsureStreams(t.Context(), b.JetStream); err != nil {
		t.Fatal(err)
	}
	filler, err := faults.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; b.publish() == nil; i++ {
		if i > 10000 {
			t.Fatal("the disk never filled")
		}
	}
	return b, filler
}

// publish publishes one raw message, waiting briefly for the ack.
func (b *Bus) publish() error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := b.JetStream.Publish(ctx, substate.RawSubject(substate.RawEngine), make([]byte, 1000))
	return err
}

// After a full disk is freed, WatchStore restarts JetStream in the running
// server and the bus takes writes again; while the disk is full, Health
// says why it does not.
func TestWatchStoreRecovers(t *testing.T) {
	b, filler := fullStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.WatchStore(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool {
		err := b.Health()
		return err != nil && strings.Contains(err.Error(), "nats store cannot take writes")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.Health() == nil && b.publish() == nil })
}

// A restart of JetStream that fails (here: its store directory is a file)
// leaves the server without JetStream: WatchStore returns the error, so
// the worker exits non-zero and its supervisor starts a new process,
// instead of running on unable to store anything.
func TestWatchStoreErrRestart(t *testing.T) {
	b, filler := fullStore(t)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b.storeDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(b.storeDir, "jetstream"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := b.WatchStore(ctx, 10*time.Millisecond)
	if err == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) || !strings.Contains(err.Error(), "restart jetstream after a store write error") {
		t.Fatalf("WatchStore: %v (context: %v), want the failed restart", err, ctx.Err())
	}
}

// waitFor waits up to 10 s for ok.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
