package mapping_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

var update = flag.Bool("update", false, "rewrite golden files")

var fixturesOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "shared", "fixtures")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
})

// fixture returns the bytes of a file under shared/fixtures/providers,
// found by walking up from the working directory.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	dir, err := fixturesOnce()
	if err != nil {
		tb.Fatalf("find shared/fixtures above the working directory: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "providers", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fixtureNames returns the provider fixture names matching pattern.
func fixtureNames(tb testing.TB, pattern string) []string {
	tb.Helper()
	dir, err := fixturesOnce()
	if err != nil {
		tb.Fatalf("find shared/fixtures above the working directory: %v", err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "providers", pattern))
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
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
// response and a history page, as engine/stepfunctions does.
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
