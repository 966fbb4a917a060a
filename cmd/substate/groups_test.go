package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/state"
)

// groupServer serves a view of 30 tenants: 20 hit by two faults across
// providers, 10 running.
func groupServer(tb testing.TB) string {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var batch []substate.Sequenced
	for i := range 30 {
		d := substate.EventData{TenantID: fmt.Sprintf("acme-%02d", i), Provider: substate.Providers[i%3], ExecutionID: "x",
			Workflow: "provision", SubState: substate.StateRunning, Revision: 1, OccurredAt: t0.Add(time.Duration(i) * time.Minute)}
		switch {
		case i < 14:
			d.SubState, d.ErrorType, d.ErrorMessage = substate.StateFailed, "Timeout", fmt.Sprintf("timed out after %d ms", 100+i)
		case i < 20:
			d.SubState, d.ErrorType, d.ErrorMessage = substate.StateBackingOff, "", fmt.Sprintf("card %d declined", i)
		}
		d.ErrorFingerprint = mapping.Fingerprint(d.Provider, d.ErrorType, d.ErrorMessage)
		d.Normalize()
		batch = append(batch, substate.Sequenced{Seq: uint64(i + 1), Event: d})
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		tb.Fatal(err)
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Views: db}
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s.URL()
}

func TestTenantsGroups(t *testing.T) {
	base := groupServer(t)
	code, out, errOut := runCLI(t, "tenants", "groups", "--server", base)
	if code != 0 {
		t.Fatalf("tenants groups: %d %s", code, errOut)
	}
	for _, want := range []string{"COUNT  SHARE  FINGERPRINT", "5      16.7%  restate/timeout/timed out after <n> ms        acme-13        2026-03-01 09:01 UTC  2026-03-01 09:13 UTC",
		"2      6.7%   engine//card <n> declined",
		"30 tenants match: 20 in the 6 groups above, 10 without a fingerprint (counted from the view's counters)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(t, "tenants", "groups", "--server", base, "--by", "provider", "--sub-state", "failed", "--tenant-prefix", "acme-1", "--json")
	var page substate.GroupPage
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || page.Total != 4 || page.Scanned == 0 || page.GroupCount != 3 {
		t.Errorf("groups by provider of acme-1* failed: %d %v %+v %s", code, err, page, errOut)
	}
	code, out, _ = runCLI(t, "tenants", "list", "--server", base, "--fingerprint", "restate//card <n> declined")
	if code != 0 || strings.Count(out, "acme-") != 2 || !strings.Contains(out, "acme-16") {
		t.Errorf("tenants list --fingerprint: %d\n%s", code, out)
	}
	code, _, errOut = runCLI(t, "tenants", "groups", "--server", base, "--verb", "resting")
	if code != 1 || !strings.Contains(errOut, "unknown verb") {
		t.Errorf("--verb resting: %d %s", code, errOut)
	}
}
