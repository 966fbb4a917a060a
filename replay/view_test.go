package replay_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
)

func TestRebuildFile(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	live := openView(t, "live.db")
	runProjector(t, b, live)
	publish(t, b, randomEvents(rand.New(rand.NewPCG(1, 2)), 200)...)
	waitApplied(t, live, lastSeq(t, b))
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "view.db")
		var batches int
		p, tenants, err := replay.RebuildFile(ctx, b.JetStream, file, replay.Range{}, 16, func(replay.Progress) { batches++ })
		if err != nil {
			t.Fatal(err)
		}
		want := allTenants(t, live)
		if tenants != len(want) || p.Events != 200 || batches < 200/16 {
			t.Errorf("%d tenants, progress %+v in %d batches; want %d tenants, 200 events, batches of 16", tenants, p, batches, len(want))
		}
		if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
			t.Errorf("%s.tmp left behind: %v", file, err)
		}
		db := state.NewDB(file)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if diffs := replay.Compare(want, allTenants(t, db)); len(diffs) > 0 {
			t.Fatalf("rebuilt file differs from the live view: %+v", diffs)
		}
	})
	t.Run("StaleTmp", func(t *testing.T) {
		// A FILE.tmp an interrupted rebuild left is replaced, not reused.
		file := filepath.Join(t.TempDir(), "view.db")
		if err := os.WriteFile(file+".tmp", []byte("not a view"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := replay.RebuildFile(ctx, b.JetStream, file, replay.Range{}, 0, nil); err != nil {
			t.Fatal(err)
		}
		if err := state.CheckFile(file, 2*time.Second); err != nil {
			t.Fatalf("rebuilt file: %v", err)
		}
	})
	t.Run("AllViews", func(t *testing.T) {
		got, err := replay.AllViews(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if diffs := replay.Compare(allTenants(t, live), got); len(diffs) > 0 || len(got) == 0 {
			t.Fatalf("AllViews: %d tenants, diffs %+v", len(got), diffs)
		}
	})
}
