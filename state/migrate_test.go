package state_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// TestOpenBeforeGroups opens a view file written by the previous release
// (testdata/view-before-groups.db: 60 tenants over every provider,
// sub-state, step and workflow, with errors): Open builds the group
// indexes and counters once from its records, the groups answer what the
// records say, the records read with their last event time as the time
// they entered their sub-state, and new events move them as usual.
func TestOpenBeforeGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "view.db")
	copyFile(t, "testdata/view-before-groups.db", path)
	if schema(t, path) != 1 {
		t.Fatal("the test file is not of schema 1")
	}
	var logs bytes.Buffer
	db := state.NewDB(path)
	db.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := db.Open(); err != nil {
		t.Fatalf("open a view written before the groups: %v", err)
	}
	t.Cleanup(func() { closeAndVerify(t, db) })
	if !strings.Contains(logs.String(), "built the group indexes") || !strings.Contains(logs.String(), "tenants=60") {
		t.Errorf("no log of the build: %s", logs.String())
	}
	views := allViewsOf(t, db)
	if len(views) != 60 {
		t.Fatalf("%d tenants, want 60", len(views))
	}
	for _, v := range views {
		if !v.WorkflowSubStateSince.Equal(v.LastEventAt) || v.WorkflowType != "" || v.WorkflowErrorFingerprint != "" {
			t.Fatalf("%s: since %v (last event %v), type %q, fingerprint %q", v.TenantID, v.WorkflowSubStateSince, v.LastEventAt,
				v.WorkflowType, v.WorkflowErrorFingerprint)
		}
	}
	for _, by := range substate.GroupBys {
		for _, f := range []substate.TenantFilter{{}, {SubState: failed}, {Provider: substate.ProviderRestate, HasError: true}, {TenantPrefix: "tenant-0001"}} {
			q := substate.GroupQuery{By: by, Filter: f}
			got, err := db.Groups(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			want := expectGroups(views, q, db.Now(), state.DefaultLimit)
			want.Scanned = got.Scanned
			if !equalPages(got, want) {
				t.Errorf("%s %+v:\n got  %s\n want %s", by, f, describe(got), describe(want))
			}
		}
	}
	// New events give a legacy tenant the new fields.
	v := views[7]
	e := ev(v.TenantID, v.WorkflowExecutionID, errored, 9, provider(v.Provider), workflow("billing"),
		fault("boom", "Boom", "engine/boom/boom"), at(v.LastEventAt.Add(time.Minute)))
	mustApply(t, db, []substate.Sequenced{{Seq: 1000, Event: e}})
	reopen(t, db)
	got := mustTenant(t, db, v.TenantID)
	if got.WorkflowType != "billing" || got.WorkflowErrorFingerprint != "engine/boom/boom" || !got.WorkflowSubStateSince.Equal(e.OccurredAt) {
		t.Errorf("after a new event: %+v", got)
	}
	closeAndVerify(t, db)
	if schema(t, path) != 2 {
		t.Error("the schema was not moved to 2")
	}
}

// TestOpenInterruptedMigration opens a schema 1 file whose group buckets
// an interrupted build left half written: the build starts over.
func TestOpenInterruptedMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "view.db")
	copyFile(t, "testdata/view-before-groups.db", path)
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket([]byte("group-members"))
		if err != nil {
			return err
		}
		return m.Put([]byte("\x00\x01\x01\x00stray"), nil)
	})
	if cerr := b.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	db := state.NewDB(path)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	closeAndVerify(t, db)
}

// schema reads the schema version of a closed view file.
func schema(tb testing.TB, path string) byte {
	tb.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	var v byte
	err = b.View(func(tx *bolt.Tx) error {
		if s := tx.Bucket([]byte("meta")).Get([]byte("schema")); len(s) == 1 {
			v = s[0]
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func allViewsOf(tb testing.TB, db *state.DB) []substate.TenantView {
	tb.Helper()
	return pageShort(tb, db, substate.TenantFilter{}, 1000)
}
