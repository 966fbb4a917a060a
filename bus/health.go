package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Health returns nil while the bus can take writes: the connection is up
// and, with the embedded server, its JetStream store reported no write
// error at the last check (see WatchStore). Otherwise it says why.
func (b *Bus) Health() error {
	if b.Conn == nil || !b.Conn.IsConnected() {
		return errors.New("nats is not connected")
	}
	if p := b.storeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// WatchStore checks the embedded server's JetStream health every period
// until ctx is done; without an embedded server it only waits for ctx. A
// stream that failed a write (a full disk) keeps refusing writes in
// nats-server even once space is free again; the bus then reports itself
// unhealthy (Health) and, as soon as a probe write in the store directory
// succeeds, restarts JetStream in the running server, which reloads every
// stream from disk without the error. Acknowledged messages are kept;
// consumers resume. A restart that fails leaves the server without
// JetStream, which nothing short of a new process mends: WatchStore then
// returns the error, for the worker to exit non-zero.
//
// A store directory removed or replaced under the running server (see
// storeDirs) is fatal too: the bus reports itself unhealthy at once, so
// nothing more is acknowledged, logs why, and WatchStore returns the
// error.
func (b *Bus) WatchStore(ctx context.Context, period time.Duration) error {
	if b.server == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(min(period, StoreDirsEvery))
	defer t.Stop()
	var health time.Time // when checkStore last ran
	for {
		if err := b.checkStoreDirs(ctx); err != nil {
			b.storeErr.Store(&err)
			b.logger.Error("nats store gone under the running server; exiting", "err", err)
			return err
		}
		if time.Since(health) >= period {
			if err := b.checkStore(); err != nil {
				return err
			}
			health = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// StoreDirsEvery is how often WatchStore looks at the store's directories
// (a few stat calls): a store removed under the server is noticed within
// it, and the server acknowledges for no longer.
const StoreDirsEvery = 100 * time.Millisecond

// checkStore runs one health check of the embedded server's JetStream; it
// returns an error only when restarting JetStream failed.
func (b *Bus) checkStore() error {
	hs := b.server.Healthz(&server.HealthzOptions{})
	if hs.Status == "ok" {
		if b.storeErr.Swap(nil) != nil {
			b.logger.Info("nats store healthy again")
		}
		return nil
	}
	err := fmt.Errorf("nats store cannot take writes: %s", hs.Error)
	if b.storeErr.Swap(&err) == nil {
		b.logger.Error("nats store cannot take writes; ingest answers 503 until it can", "err", hs.Error)
	}
	if !strings.Contains(hs.Error, "write error") {
		return nil // not a write error: nothing a restart of JetStream fixes
	}
	if perr := probeWrite(b.storeDir); perr != nil {
		return nil // still full
	}
	if rerr := b.restartJetStream(); rerr != nil {
		return fmt.Errorf("restart jetstream after a store write error: %w", rerr)
	}
	b.logger.Warn("disk writable again: restarted jetstream, which reloaded its streams without the write error")
	return nil
}

// probeWrite writes and syncs 1 MiB in dir and removes it: whether the
// store has room again.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".substate-probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 1<<20))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// restartJetStream shuts JetStream down in the running server and enables
// it again with the same store.
func (b *Bus) restartJetStream() error {
	cfg := b.server.JetStreamConfig()
	if cfg == nil {
		return errors.New("jetstream is not enabled")
	}
	cfg.StoreDir = b.storeDir // JetStreamConfig's has /jetstream appended, which Enable appends again
	if err := b.server.ShutdownJetStream(); err != nil {
		return err
	}
	return b.server.EnableJetStream(cfg)
}

// storePath is the store directory the embedded server was given.
func storePath(c Config) string { return filepath.Clean(c.StoreDir) }
