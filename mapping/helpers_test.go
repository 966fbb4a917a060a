package mapping_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture returns the bytes of an embedded provider fixture.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	return fixtures.Provider(name)
}

// fixtureNames returns the provider fixture names matching pattern.
func fixtureNames(tb testing.TB, pattern string) []string {
	tb.Helper()
	return fixtures.Providers(pattern)
}

// testRules are the tenant rules of the tests: the fixtures' inputs carry a
// customerId, no tenantId.
func testRules(tb testing.TB) mapping.TenantRules {
	tb.Helper()
	rules, err := mapping.ParseTenantRules("input:$.tenantId", "input:$.customerId", "restate:key", "engine:tenant")
	if err != nil {
		tb.Fatal(err)
	}
	return rules
}

func newMapper(tb testing.TB) *mapping.Mapper {
	tb.Helper()
	return mapping.New(mapping.Config{Tenants: testRules(tb)})
}

// pollPayload builds a stepfunctions.poll body from a DescribeExecution
// response and a history page, as providers/stepfunctions does.
func pollPayload(tb testing.TB, describe, history []byte) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]any{
		"execution": json.RawMessage(describe),
		"history":   json.RawMessage(history),
		"polledAt":  "2024-06-19T10:01:05.123Z",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// golden compares got, as indented JSON, with testdata/golden/name and
// rewrites the file with -update.
func golden(tb testing.TB, name string, got any) {
	tb.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(b, want) {
		tb.Errorf("%s differs from the golden file (run go test -update after checking):\ngot:\n%s\nwant:\n%s", name, b, want)
	}
}

func mustMap(tb testing.TB, m *mapping.Mapper, kind substate.RawKind, body []byte) []substate.EventData {
	tb.Helper()
	evs, err := m.Map(substate.RawEvent{Kind: kind, ID: "test", Body: body})
	if err != nil {
		tb.Fatalf("Map(%s): %v", kind, err)
	}
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			tb.Fatalf("Map(%s) event %d invalid: %v", kind, i, err)
		}
	}
	return evs
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := substate.ErrorCode(err); got != code {
		tb.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func mappingWithRules(tb testing.TB, rules ...string) *mapping.Mapper {
	tb.Helper()
	rs, err := mapping.ParseTenantRules(rules...)
	if err != nil {
		tb.Fatal(err)
	}
	return mapping.New(mapping.Config{Tenants: rs})
}
