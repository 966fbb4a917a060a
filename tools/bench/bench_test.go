package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// The bench's EventBridge events map to the status changes they carry, and
// keyOf finds each one's key again from its canonical event.
func TestBenchLoadMaps(t *testing.T) {
	rules, err := mapping.ParseTenantRules()
	if err != nil {
		t.Fatal(err)
	}
	m := mapping.New(mapping.Config{Tenants: rules})
	load := benchLoad{shape: loadOutOfOrder, tenants: 7, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, e := range load.events(100, rand.New(rand.NewPCG(1, 2))) {
		evs, err := m.Map(load.raw(e, nil))
		if err != nil {
			t.Fatal(err)
		}
		d := evs[0]
		if d.TenantID != tenantName(e.tenant) || keyOf(&d) != e.key() || d.ProviderState != e.status {
			t.Fatalf("event %+v maps to %+v", e, d)
		}
		if e.status == "FAILED" && !strings.Contains(d.ErrorMessage, "quota exceeded for tenant "+d.TenantID) {
			t.Errorf("error message %q", d.ErrorMessage)
		}
	}
}

// The retries load's engine events map to the sub-states, retry counts
// and errors of its steps, under the tenant they name, and keyOf finds
// each one's key again.
func TestBenchRetriesLoadMaps(t *testing.T) {
	rules, err := mapping.ParseTenantRules()
	if err != nil {
		t.Fatal(err)
	}
	m := mapping.New(mapping.Config{Tenants: rules})
	load := benchLoad{shape: loadRetries, tenants: 3, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	events := load.events(3*2*len(retrySteps), nil)
	keys := map[int]bool{}
	for _, e := range events {
		evs, err := m.Map(load.raw(e, nil))
		if err != nil {
			t.Fatal(err)
		}
		d := evs[0]
		sub, _, hasErr := e.want()
		if d.TenantID != tenantName(e.tenant) || keyOf(&d) != e.key() || d.SubState != sub || (d.ErrorMessage != "") != hasErr {
			t.Fatalf("event %+v maps to %+v", e, d)
		}
		if sub == substate.StateBackingOff && (d.RetryCount != 1 || !d.RetryCountKnown || d.NextRetryAt.IsZero() || !strings.Contains(d.ErrorMessage, "503 Service Unavailable")) {
			t.Errorf("backing-off maps to %+v", d)
		}
		keys[e.key()] = true
	}
	if len(keys) != len(events) {
		t.Errorf("%d distinct keys for %d events", len(keys), len(events))
	}
	if last := events[len(events)-1]; last.status != substate.EngineFailed {
		t.Errorf("a tenant's second execution ends %s, want failed", last.status)
	}
}

// Every shape sends each tenant's status changes once (half-noop twice),
// and out-of-order keeps the set of events.
func TestBenchLoadShapes(t *testing.T) {
	load := benchLoad{tenants: 10}
	rng := rand.New(rand.NewPCG(3, 4))
	changes := load.events(1000, rng)
	load.shape = loadOutOfOrder
	ooo := load.events(1000, rng)
	load.shape = loadHalfNoop
	half := load.events(1000, rng)
	keys := func(evs []benchEvent) map[int]int {
		m := map[int]int{}
		for _, e := range evs {
			m[e.key()]++
		}
		return m
	}
	if got := keys(changes); len(got) != 1000 {
		t.Errorf("changes: %d distinct changes, want 1000", len(got))
	}
	if got, want := keys(ooo), keys(changes); len(got) != len(want) {
		t.Errorf("out-of-order: %d distinct changes, want %d", len(got), len(want))
	}
	swapped := 0
	for i := range ooo {
		if ooo[i] != changes[i] {
			swapped++
		}
	}
	if swapped == 0 {
		t.Error("out-of-order: nothing moved")
	}
	for k, n := range keys(half) {
		if n != 2 {
			t.Fatalf("half-noop: change %d sent %d times, want 2", k, n)
		}
	}
	if want := expectedView(changes); len(want) != 10 {
		t.Errorf("expected view of %d tenants, want 10", len(want))
	}
}

// A wrong view fails the run, whatever the figures.
func TestBenchReportWrong(t *testing.T) {
	ok := &ScenarioResult{Name: "changes", ViewCheck: "ok"}
	rep := &Report{Scenarios: []*ScenarioResult{ok, ok, ok}, AtRate: ok, LargeView: ok, Naive: ok,
		Rebuild: &RebuildResult{EqualsLive: "yes"}}
	if got := rep.wrong(); len(got) != 0 {
		t.Fatalf("wrong() = %q for a correct run", got)
	}
	rep.Naive = &ScenarioResult{Name: "naive", ViewCheck: "2 tenants differ from the order rules, e.g. …"}
	rep.Rebuild = &RebuildResult{EqualsLive: "no: 1 tenants differ"}
	if got := rep.wrong(); len(got) != 2 || !strings.HasPrefix(got[0], "naive: view: 2 tenants") {
		t.Fatalf("wrong() = %q, want the naive view and the rebuild", got)
	}
}
