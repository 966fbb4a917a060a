package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// watch runs b.WatchStore until the test ends and returns what it
// returned, once it has.
func watch(t *testing.T, b *bus.Bus) <-chan error {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.WatchStore(ctx, 10*time.Millisecond) }()
	t.Cleanup(cancel)
	return done
}

func TestWatchStoreDirs(t *testing.T) {
	open := func(t *testing.T) (*bus.Bus, string) {
		dir := t.TempDir()
		b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if err := bus.DefaultTopology().EnsureStreams(t.Context(), b.JetStream); err != nil {
			t.Fatal(err)
		}
		return b, dir
	}
	t.Run("StreamDeletedThroughTheAPI", func(t *testing.T) {
		b, _ := open(t)
		done := watch(t, b)
		time.Sleep(3 * bus.StoreDirsEvery) // the stream directories are seen
		if err := b.JetStream.DeleteStream(t.Context(), substate.StreamDLQ); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("WatchStore stopped with %v after a stream was deleted through the API", err)
		case <-time.After(5 * bus.StoreDirsEvery):
		}
		if err := b.Health(); err != nil {
			t.Fatalf("health: %v", err)
		}
	})
	for _, tc := range []struct {
		name    string
		replace func(dir string) error
		gone    string
	}{
		{"StoreRemoved", os.RemoveAll, ""}, // whichever directory goes first
		{"JetStreamReplaced", func(dir string) error {
			js := filepath.Join(dir, "jetstream")
			if err := os.Rename(js, js+".old"); err != nil {
				return err
			}
			return os.Mkdir(js, 0o755) // a restore from another copy
		}, "jetstream"},
		{"StreamRemoved", func(dir string) error {
			streams, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", substate.StreamEvents))
			if len(streams) != 1 {
				return os.ErrNotExist
			}
			return os.RemoveAll(streams[0])
		}, substate.StreamEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dir := open(t)
			done := watch(t, b)
			time.Sleep(3 * bus.StoreDirsEvery)
			if err := tc.replace(dir); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil || !strings.HasPrefix(err.Error(), "nats store was deleted or replaced under the running server: "+dir) ||
					!strings.Contains(err.Error(), tc.gone+" is gone or is another directory now") {
					t.Fatalf("WatchStore: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("WatchStore did not notice")
			}
			if err := b.Health(); err == nil || !strings.Contains(err.Error(), "deleted or replaced") {
				t.Fatalf("health: %v, want the store gone", err)
			}
		})
	}
}
