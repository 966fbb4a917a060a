package mapping_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

func TestParseTenantRule(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, s := range []string{"input:$.tenantId", "input:$.tenant['id']", "input:$..tenantId", "name:^(?P<tenant>[a-z0-9-]+)--", "restate:key", "engine:tenant"} {
			r, err := mapping.ParseTenantRule(s)
			if err != nil {
				t.Fatalf("ParseTenantRule(%q): %v", s, err)
			}
			if got := r.String(); got != s {
				t.Errorf("String() = %q, want %q", got, s)
			}
		}
	})
	t.Run("TextUnmarshal", func(t *testing.T) {
		var rules []mapping.TenantRule
		if err := json.Unmarshal([]byte(`["input:$.t","engine"]`), &rules); err != nil {
			t.Fatal(err)
		}
		if got, want := rules[1].String(), "engine:tenant"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, s := range []string{"", "input:", "input:tenantId", "name:[", "name:^(?P<t>x)", "restate:id", "engine:x", "header:x"} {
			_, err := mapping.ParseTenantRule(s)
			wantCode(t, err, substate.EINVALID)
		}
	})
}

func TestResolveTenant(t *testing.T) {
	tests := []struct {
		name  string
		rules []string
		input any
		want  string
	}{
		{"Default", []string{"input:$.tenantId"}, `{"tenantId":"acme"}`, "acme"},
		{"Nested", []string{"input:$.meta.tenant"}, `{"meta":{"x":[1,{"a":"}"}],"tenant":"acme"}}`, "acme"},
		{"Escapes", []string{"input:$.tenantId"}, `{"tenant\u0049d":"ac\"me"}`, `ac"me`},
		{"LastDuplicateWins", []string{"input:$.tenantId"}, `{"tenantId":"old","tenantId":"new"}`, "new"},
		{"Number", []string{"input:$.tenantId"}, `{"tenantId":42}`, "42"},
		{"Filter", []string{"input:$.tags[?@.k=='tenant'].v"}, `{"tags":[{"k":"env","v":"prod"},{"k":"tenant","v":"acme"}]}`, "acme"},
		{"Descendant", []string{"input:$..tenantId"}, `{"a":{"b":{"tenantId":"acme"}}}`, "acme"},
		{"FirstRuleWins", []string{"input:$.missing", "input:$.tenantId", "name:^(?P<tenant>[a-z]+)--"}, `{"tenantId":"in"}`, "in"},
		{"FallsToName", []string{"input:$.tenantId", "name:^(?P<tenant>[a-z]+)--"}, `{"tenantId":{"nested":true}}`, "acme"},
		{"EmptyStringSkipped", []string{"input:$.tenantId", "name:^(?P<tenant>[a-z]+)--"}, `{"tenantId":" "}`, "acme"},
		{"InputNotJSON", []string{"input:$.tenantId", "name:^(?P<tenant>[a-z]+)--"}, `not json`, "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mappingWithRules(t, tt.rules...)
			ev := mustMap(t, m, substate.RawEventBridge, sfnEvent(t, "RUNNING", map[string]any{"input": tt.input}))[0]
			if got := ev.TenantID; got != tt.want {
				t.Errorf("tenant = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("ErrNoTenantListsRules", func(t *testing.T) {
		m := mappingWithRules(t, "input:$.tenantId", "name:^(?P<tenant>[0-9]+)$", "restate:key")
		_, err := m.Map(substate.RawEvent{Kind: substate.RawEventBridge, Body: sfnEvent(t, "RUNNING", map[string]any{"input": `{"x":1}`})})
		wantCode(t, err, substate.ENOTENANT)
		for _, s := range []string{"input:$.tenantId (no match)", `name:^(?P<tenant>[0-9]+)$ (no match in "acme--run-1")`, "restate:key (no target_service_key)", "acme--run-1"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
	})
	t.Run("RestateNameRuleOnKey", func(t *testing.T) {
		m := mappingWithRules(t, "name:^(?P<tenant>[a-z]+)$")
		if got := mustMap(t, m, substate.RawRestate, restateRow(t, "running", nil))[0].TenantID; got != "acme" {
			t.Errorf("tenant = %q, want acme", got)
		}
	})
}

// FuzzInputRule checks the member-name fast path of input rules against a
// full decode of the same input.
func FuzzInputRule(f *testing.F) {
	for _, s := range []string{`{"tenantId":"acme"}`, `{"a":{"tenantId":1}}`, `{"tenantId":"x","tenantId":"y"}`,
		`{"t\u0065nantId":"e"}`, `{"x":"}","tenantId":"q"}`, `{"tenantId":1e3}`, `{"tenantId":[1]}`, `[]`} {
		f.Add(s)
	}
	m := mappingWithRules(f, "input:$.tenantId", "name:^(?P<tenant>fallback)")
	f.Fuzz(func(t *testing.T, input string) {
		var doc map[string]any
		if !utf8.ValidString(input) || json.Unmarshal([]byte(input), &doc) != nil {
			return
		}
		want := "fallback"
		switch v := doc["tenantId"].(type) {
		case string:
			if strings.TrimSpace(v) != "" {
				want = v
			}
		case float64:
			want = strconv.FormatFloat(v, 'f', -1, 64)
		}
		body := sfnEvent(t, "RUNNING", map[string]any{"input": input, "name": "fallback"})
		ev, err := m.MapEventBridge(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.TenantID; got != want {
			t.Errorf("input %s: tenant %q, want %q", input, got, want)
		}
	})
}
