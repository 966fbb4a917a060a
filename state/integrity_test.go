package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/faults"
)

// corruptible returns a closed view file with n tenants, and the root page
// of its bucket called bucket: a page every access of that bucket reads.
func corruptible(t *testing.T, n int, bucket string) (path string, page uint64) {
	t.Helper()
	db := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	db.Now = (&clock{now: t0}).Now
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	populationFast(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	page, err := faults.BoltBucketRoot(db.Path, bucket)
	if err != nil {
		t.Fatal(err)
	}
	return db.Path, page
}

// openView opens the view file at path with a test clock; the test closes it.
func openView(t *testing.T, path string, configure ...func(*state.DB)) (*state.DB, error) {
	t.Helper()
	db := state.NewDB(path)
	db.Now = (&clock{now: t0}).Now
	for _, f := range configure {
		f(db)
	}
	return db, db.Open()
}

// wantCorrupt checks that err is (or wraps) the *CorruptError of file,
// found doing op, naming page and the rebuild command.
func wantCorrupt(t *testing.T, err error, file, op string, page uint64) *state.CorruptError {
	t.Helper()
	var ce *state.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *state.CorruptError", err)
	}
	if ce.File != file || ce.Op != op {
		t.Errorf("corrupt error file %q op %q, want %q %q", ce.File, ce.Op, file, op)
	}
	for _, s := range []string{file, "is corrupt", fmt.Sprint(page), "substate rebuild --out " + file + " --force"} {
		if !strings.Contains(ce.Error(), s) {
			t.Errorf("error %q does not say %q", ce, s)
		}
	}
	return ce
}

// A page of garbage under an open view: reads and writes return errors
// instead of panicking, Health says why from then on, writes are refused,
// and Close does not hang.
func TestCorruptPageWhileOpen(t *testing.T) {
	ctx := context.Background()
	path, page := corruptible(t, 2000, "tenants")
	db, err := openView(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Health(); err != nil {
		t.Fatalf("Health before = %v", err)
	}
	if err := faults.CorruptBoltPage(path, page); err != nil {
		t.Fatal(err)
	}
	_, err = db.Tenant(ctx, tenantID(1))
	if substate.ErrorCode(err) != substate.EUNAVAILABLE || substate.ErrorMessage(err) != "tenant view is unavailable: its file is corrupt" {
		t.Fatalf("Tenant = %v (%s), want EUNAVAILABLE", err, substate.ErrorCode(err))
	}
	wantCorrupt(t, err, path, state.OpRead, page)
	wantCorrupt(t, db.Health(), path, state.OpRead, page)
	if _, err := db.Tenants(ctx, substate.TenantFilter{}); substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("Tenants = %v, want EUNAVAILABLE", err)
	}
	_, err = db.Apply(ctx, []substate.Sequenced{{Seq: 9999, Event: ev("new", "x", running, 1)}})
	if substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("Apply = %v, want EUNAVAILABLE", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// A page only writes reach (the sub-state index): the write fails with an
// error, later writes are refused without touching the file, and reads of
// intact pages go on.
func TestCorruptPageOnWrite(t *testing.T) {
	ctx := context.Background()
	path, page := corruptible(t, 2000, "by-sub-state")
	db, err := openView(t, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := faults.CorruptBoltPage(path, page); err != nil {
		t.Fatal(err)
	}
	_, err = db.Apply(ctx, []substate.Sequenced{{Seq: 9999, Event: ev("new", "x", failed, 1)}})
	wantCorrupt(t, err, path, state.OpWrite, page)
	if substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("Apply = %v, want EUNAVAILABLE", err)
	}
	wantCorrupt(t, db.Health(), path, state.OpWrite, page)
	_, err = db.Apply(ctx, []substate.Sequenced{{Seq: 10000, Event: ev("other", "x", failed, 1)}})
	if substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("second Apply = %v, want EUNAVAILABLE", err)
	}
	if v, err := db.Tenant(ctx, tenantID(7)); err != nil || v.TenantID != tenantID(7) {
		t.Fatalf("Tenant on an intact page = %+v, %v", v, err)
	}
	if cp, _ := db.Checkpoint(ctx); cp != 2000 {
		t.Fatalf("checkpoint %d, want 2000: the failed writes must not move it", cp)
	}
}

// Check finds a page of garbage that nothing has read yet.
func TestCheckFindsCorruptPage(t *testing.T) {
	path, page := corruptible(t, 2000, "by-retry")
	db, err := openView(t, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatalf("Check of an intact file = %v", err)
	}
	if err := faults.CorruptBoltPage(path, page); err != nil {
		t.Fatal(err)
	}
	ce := wantCorrupt(t, db.Check(), path, state.OpCheck, page)
	if db.Health() != ce {
		t.Fatalf("Health = %v, want the check's error", db.Health())
	}
}

// Opening a file with a page of garbage is a *CorruptError naming the
// file, the page and the rebuild command; with MoveCorrupt the file is
// moved aside, kept, and an empty view opens in its place.
func TestOpenCorrupt(t *testing.T) {
	for _, bucket := range []string{"tenants", "by-sub-state", "with-error", "by-retry"} {
		t.Run(bucket, func(t *testing.T) {
			path, page := corruptible(t, 2000, bucket)
			if err := faults.CorruptBoltPage(path, page); err != nil {
				t.Fatal(err)
			}
			db, err := openView(t, path)
			wantCorrupt(t, err, path, state.OpOpen, page)
			if db.Health() == nil {
				t.Error("Health of a view that failed to open for corruption is nil")
			}
		})
	}
	t.Run("Freelist", func(t *testing.T) {
		path, _ := corruptible(t, 2000, "tenants")
		page := freelistPage(t, path)
		if err := faults.CorruptBoltPage(path, page); err != nil {
			t.Fatal(err)
		}
		_, err := openView(t, path)
		wantCorrupt(t, err, path, state.OpOpen, 0)
	})
	t.Run("BothMetaPages", func(t *testing.T) {
		path, _ := corruptible(t, 2000, "tenants")
		for _, page := range []uint64{1, 0} { // page 0 last: it gives the page size
			if err := faults.CorruptBoltPage(path, page); err != nil {
				t.Fatal(err)
			}
		}
		_, err := openView(t, path)
		wantCorrupt(t, err, path, state.OpOpen, 0)
	})
	t.Run("MoveCorrupt", func(t *testing.T) {
		path, page := corruptible(t, 2000, "tenants")
		if err := faults.CorruptBoltPage(path, page); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)
		var logs bytes.Buffer
		db, err := openView(t, path, func(db *state.DB) {
			db.MoveCorrupt, db.Logger = true, slog.New(slog.NewTextHandler(&logs, nil))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if cp, _ := db.Checkpoint(context.Background()); cp != 0 || db.Health() != nil {
			t.Fatalf("checkpoint %d, health %v; want an empty healthy view", cp, db.Health())
		}
		aside, _ := filepath.Glob(path + ".corrupt-*")
		if len(aside) != 1 {
			t.Fatalf("files moved aside: %v", aside)
		}
		if kept, _ := os.ReadFile(aside[0]); !bytes.Equal(kept, before) {
			t.Fatal("the corrupt file was not kept as it was")
		}
		for _, s := range []string{"level=ERROR", "file=" + path, "moved_to=" + aside[0], fmt.Sprint(page)} {
			if !strings.Contains(logs.String(), s) {
				t.Errorf("log %q does not say %q", logs.String(), s)
			}
		}
	})
}

// Files bbolt itself refuses to open are corrupt too; a file another
// process holds is not.
func TestOpenNotABoltFile(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"Garbage", faults.Garbage(16384, 1)},
		{"Text", bytes.Repeat([]byte("not a database\n"), 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "view.db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := openView(t, path)
			wantCorrupt(t, err, path, state.OpOpen, 0)
		})
	}
	t.Run("ErrLockedIsNotCorrupt", func(t *testing.T) {
		path, _ := corruptible(t, 2000, "tenants")
		holder, err := openView(t, path)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		_, err = openView(t, path, func(db *state.DB) { db.OpenTimeout = 50e6 })
		var ce *state.CorruptError
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("second Open = %v, want a lock timeout that is not corruption", err)
		}
	})
}

func TestShellQuotedRebuildCommand(t *testing.T) {
	ce := &state.CorruptError{File: "/var/lib/substate data/view.db"}
	if got, want := ce.RebuildCommand(), `substate rebuild --out '/var/lib/substate data/view.db' --force`; got != want {
		t.Fatalf("RebuildCommand = %s, want %s", got, want)
	}
}

// freelistPage returns the page of the closed bbolt file at path that
// holds the freelist.
func freelistPage(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var page uint64
	_ = db.View(func(tx *bolt.Tx) error {
		for id := 2; page == 0; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				t.Fatalf("no freelist page: %v", err)
			}
			if p.Type == "freelist" {
				page = uint64(id)
			}
		}
		return nil
	})
	return page
}
