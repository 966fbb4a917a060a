package state_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/faults"
)

// A deadline that passes while the view's disk is full marks nobody stuck
// and loses nothing: the refused transaction leaves every tenant in the
// timer index, not stuck, with no stuck message; once space is freed the
// same deadlines fire, each tenant stuck once with its message in the
// outbox. Needs a tmpfs (root on Linux, as in CI).
func TestExpireDeadlinesOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := faults.Tmpfs(t, 16<<20)
	c := &clock{now: t0}
	db := state.NewDB(filepath.Join(dir, "view.db"))
	db.Now, db.ChangeOutbox = c.Now, true
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAndVerify(t, db) })
	db.SetSLOs(testSLOs(t))
	if _, err := db.RecomputeDeadlines(ctx); err != nil {
		t.Fatal(err)
	}
	const tenants = 800 // stuck messages of a few MiB: more than the file's free pages
	cause := strings.Repeat("upstream answered 503; ", 60)
	s := newStream(t, db)
	for i := range tenants {
		s.apply(ev(fmt.Sprintf("t%04d", i), "e1", substate.StateBackingOff, 1, workflow("billing"), failure(cause)))
	}
	drain(t, db)
	deadline, _ := db.NextDeadline()

	filler, err := faults.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.now = deadline.Add(time.Minute)
	if res, _, err := db.ExpireDeadlines(ctx, time.Time{}, 0); err == nil {
		t.Fatalf("expired %d tenants on a full disk, want the commit refused", len(res.Changes))
	}
	if next, _ := db.NextDeadline(); !next.Equal(deadline) {
		t.Fatalf("NextDeadline after a refused commit = %s, want %s still", next, deadline)
	}
	if v := mustTenant(t, db, "t0000"); v.Stuck {
		t.Fatalf("t0000 stuck after a refused commit: %+v", v)
	}
	if got := pendingKinds(t, db); len(got) != 0 {
		t.Fatalf("outbox after a refused commit: %d messages, want none", len(got))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	stuck := map[string]int{}
	for more := true; more; {
		var res substate.ApplyResult
		if res, more, err = db.ExpireDeadlines(ctx, time.Time{}, 0); err != nil {
			t.Fatalf("with space again: %v", err)
		}
		for _, ch := range res.Changes {
			stuck[ch.TenantID]++
		}
	}
	if len(stuck) != tenants {
		t.Fatalf("%d tenants stuck once space was freed, want %d", len(stuck), tenants)
	}
	for id, n := range stuck {
		if n != 1 {
			t.Fatalf("%s stuck %d times", id, n)
		}
	}
	if got := pendingKinds(t, db); len(got) != 100 || !strings.HasSuffix(got[0], ".stuck.t0000") {
		t.Fatalf("outbox: %d messages from %v, want the stuck messages (read 100 at most)", len(got), got[:min(len(got), 1)])
	}
}
