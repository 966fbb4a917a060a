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
