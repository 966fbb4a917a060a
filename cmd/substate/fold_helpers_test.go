package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
)

// Helpers that read what a worker left behind: its consumers' state, its
// view file, and the reference fold of its event stream.

// idle reports whether the normalizer and the projector have nothing
// pending and nothing unacknowledged.
func idle(tb testing.TB, js jetstream.JetStream) bool { return workertest.Busy(tb, js) == "" }

func consumerState(tb testing.TB, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	tb.Helper()
	info, err := bench.ConsumerInfo(context.Background(), js, stream, name)
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// readView returns every tenant of a view file.
func readView(tb testing.TB, path string) map[string]substate.TenantView {
	tb.Helper()
	db := state.NewDB(path)
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	out := map[string]substate.TenantView{}
	f := substate.TenantFilter{Limit: 1000}
	for {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, v := range page.Tenants {
			out[v.TenantID] = v
		}
		if page.NextPageToken == "" {
			return out
		}
		f.PageToken = page.NextPageToken
	}
}

// referenceFold applies the retained event stream of a stopped worker's
// embedded server in order, one event at a time, to a fresh view.
func referenceFold(tb testing.TB, dataDir string) map[string]substate.TenantView {
	tb.Helper()
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dataDir, "nats")})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	return foldStream(tb, b)
}

// referenceFoldURL folds the event stream of the NATS at url.
func referenceFoldURL(tb testing.TB, url string) map[string]substate.TenantView {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	return foldStream(tb, b)
}

func foldStream(tb testing.TB, b *bus.Bus) map[string]substate.TenantView {
	tb.Helper()
	ref := state.NewDB(filepath.Join(tb.TempDir(), "ref.db"))
	if err := ref.Open(); err != nil {
		tb.Fatal(err)
	}
	for _, m := range allMsgs(tb, b, substate.StreamEvents) {
		e, err := substate.UnmarshalEvent(m.Data)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := ref.Apply(context.Background(), []substate.Sequenced{{Seq: m.Sequence, Event: e.Data}}); err != nil {
			tb.Fatal(err)
		}
	}
	path := ref.Path
	ref.Close()
	return readView(tb, path)
}

// allMsgs returns every message of a stream in order.
func allMsgs(tb testing.TB, b *bus.Bus, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	ctx := context.Background()
	s, err := b.JetStream.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			if info, ierr := s.Info(ctx); ierr == nil && seq <= info.State.LastSeq {
				continue
			}
			return out
		} else if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m)
	}
}

// checkBolt runs bbolt's consistency check on a file.
func checkBolt(tb testing.TB, path string) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		tb.Fatalf("bbolt check: %v", err)
	}
}
