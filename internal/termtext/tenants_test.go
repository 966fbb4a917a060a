package termtext

import (
	"bytes"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

func TestWriteTenants(t *testing.T) {
	var b bytes.Buffer
	views := []substate.TenantView{
		{TenantID: "acme", WorkflowSubState: substate.StateBackingOff, WorkflowRetryCount: 2, WorkflowErrorMessage: "dns\nprovider down"},
		{TenantID: "globex"},
	}
	if err := WriteTenants(&b, views); err != nil {
		t.Fatal(err)
	}
	want := "TENANT  SUB-STATE    VERB  STEP  RETRIES  PROVIDER  EXECUTION  UPDATED  ERROR\n" +
		"acme    backing-off  -     -     2        -         -          -        dns provider down\n" +
		"globex  -            -     -     0        -         -          -        -\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWriteGroups(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	p := substate.GroupPage{By: substate.GroupByStep, Total: 10, Ungrouped: 3, GroupCount: 3, Scanned: 12, Groups: []substate.Group{
		{Value: "Charge\x1b[2J", Count: 4, SampleTenantID: "acme", FirstSeen: at, LastSeen: at.Add(time.Hour)},
		{Value: "Ship", Count: 2, SampleTenantID: "globex", FirstSeen: at, LastSeen: at},
	}}
	if err := WriteGroups(&b, p); err != nil {
		t.Fatal(err)
	}
	want := "COUNT  SHARE  STEP           SAMPLE TENANT  FIRST SEEN            LAST SEEN\n" +
		"4      40.0%  Charge\\x1b[2J  acme           2026-03-01 09:00 UTC  2026-03-01 10:00 UTC\n" +
		"2      20.0%  Ship           globex         2026-03-01 09:00 UTC  2026-03-01 09:00 UTC\n" +
		"10 tenants match: 6 in the 2 groups above, 1 in 1 more, 3 without a step (counted by reading 12 tenants)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A stuck tenant says so in its sub-state; the wide table says when a
// tenant becomes stuck, or since when it is, and for which SLO.
func TestTenantTableDeadlines(t *testing.T) {
	now := time.Now()
	views := []substate.TenantView{
		{TenantID: "acme", WorkflowSubState: substate.StateBackingOff, Deadline: now.Add(-time.Hour), DeadlineSLO: substate.SLOBackingOff,
			Stuck: true, StuckSince: now.Add(-time.Hour)},
		{TenantID: "globex", WorkflowSubState: substate.StateRunning, Deadline: now.Add(30*time.Minute + 400*time.Millisecond), DeadlineSLO: substate.SLORun},
		{TenantID: "initech", WorkflowSubState: substate.StateSucceeded},
	}
	cells := func(t Table, row, col int) string { return t.Rows[row][col] }
	narrow, wide := TenantTable(views, false), TenantTable(views, true)
	for _, c := range []struct{ got, want string }{
		{cells(narrow, 0, 1), "backing-off (stuck)"},
		{cells(narrow, 1, 1), "running"},
		{cells(wide, 0, 4), "stuck 1h0m0s ago (backing-off)"},
		{cells(wide, 1, 4), "in 30m0s (run)"},
		{cells(wide, 2, 4), "-"},
	} {
		if c.got != c.want {
			t.Errorf("cell %q, want %q", c.got, c.want)
		}
	}
	if wide.Header[4] != "DEADLINE" {
		t.Errorf("wide header %v", wide.Header)
	}
}
