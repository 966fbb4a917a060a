package mapping_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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
		`{"t\u0065nantId":"e"}`, `{"x":"}","tenantId":"q"}`, `{"tenantId":1e3}`, `{"tenantId":[1]}`, `[]`,
		`{"tenantId":"a\nb"}`, `{"tenantId":"bad\udcff"}`, `{"tenantId":"` + strings.Repeat("é", 129) + `"}`} {
		f.Add(s)
	}
	m := mappingWithRules(f, "input:$.tenantId", "name:^(?P<tenant>fallback)")
	f.Fuzz(func(t *testing.T, input string) {
		var doc map[string]any
		if !utf8.ValidString(input) || jsonv2.Unmarshal([]byte(input), &doc, jsontext.AllowDuplicateNames(true)) != nil {
			return // the strict decode refuses it (invalid surrogate escapes)
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
		if substate.ValidateTenantID(want) != nil {
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("input %s: tenant %q accepted (%v), want it refused", input, ev.TenantID, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.TenantID; got != want {
			t.Errorf("input %s: tenant %q, want %q", input, got, want)
		}
	})
}

// A tenant id that breaks substate.ValidateTenantID is refused with the
// rule and the reason, so the normalizer dead-letters the event; it is
// never cut, replaced or resolved by a later rule instead.
func TestResolveTenantInvalid(t *testing.T) {
	rules := []string{"input:$.tenantId", "name:^(?P<tenant>[a-z]+)--"}
	tests := []struct {
		name  string
		input string // the execution input JSON text
		why   string
	}{
		{"10KB", `{"tenantId":"` + strings.Repeat("a", 10_000) + `"}`, "10000 bytes, longer than the maximum of 256"},
		{"700Accents", `{"tenantId":"` + strings.Repeat("é", 700) + `"}`, "1400 bytes, longer than the maximum of 256"},
		{"UnpairedSurrogate", `{"tenantId":"bad\udcff"}`, "invalid surrogate pair"},
		{"ControlCharacter", `{"tenantId":"acme\nforged log line"}`, "control character U+000A"},
		{"GenericPath", `{"tenantId":"` + strings.Repeat("b", 300) + `"}`, "300 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := rules
			if tt.name == "GenericPath" {
				rs = []string{"input:$..tenantId", rules[1]}
			}
			m := mappingWithRules(t, rs...)
			_, err := m.Map(substate.RawEvent{Kind: substate.RawEventBridge, Body: sfnEvent(t, "RUNNING", map[string]any{"input": tt.input})})
			wantCode(t, err, substate.EINVALID)
			for _, s := range []string{"tenant rule " + rs[0] + " found an invalid tenant id", tt.why, "acme--run-1"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if len(err.Error()) > 600 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
	t.Run("Restate", func(t *testing.T) {
		m := mappingWithRules(t, "restate:key")
		_, err := m.Map(substate.RawEvent{Kind: substate.RawRestate,
			Body: restateRow(t, "running", map[string]any{"target_service_key": strings.Repeat("k", 257)})})
		wantCode(t, err, substate.EINVALID)
	})
	t.Run("Engine", func(t *testing.T) {
		m := mappingWithRules(t, "engine:tenant")
		_, err := m.MapEngineEvent(substate.EngineEvent{ID: "e", ExecutionID: "x", Status: "running", TenantID: "a\x1b[2J"})
		wantCode(t, err, substate.EINVALID)
	})
}

// Raw invalid UTF-8 in a payload is refused outright, so "bad\xff" and
// "bad\xfe" can never become one tenant "bad\uFFFD".
func TestInvalidUTF8Payload(t *testing.T) {
	m := mappingWithRules(t, "input:$.tenantId")
	for _, b := range []byte{0xff, 0xfe} {
		body := bytes.Replace(sfnEvent(t, "RUNNING", map[string]any{"input": `{"tenantId":"bad@"}`}), []byte("bad@"), []byte{'b', 'a', 'd', b}, 1)
		_, err := m.Map(substate.RawEvent{Kind: substate.RawEventBridge, Body: body})
		wantCode(t, err, substate.EINVALID)
		if want := fmt.Sprintf("not valid UTF-8 (byte 0x%02X at offset", b); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
