package jsonx_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/substatehq/substate/internal/jsonx"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name, in string
		want     any
		ok       bool
	}{
		{"Object", `{"a":[1,"b",true,null]}`, map[string]any{"a": []any{json.Number("1"), "b", true, nil}}, true},
		{"BigNumberKeepsItsText", `12345678901234567890.5`, json.Number("12345678901234567890.5"), true},
		{"SpaceAround", " \n{}\t", map[string]any{}, true},
		{"Trailing", `{} {}`, nil, false},
		{"TrailingJunk", `1 x`, nil, false},
		{"NotJSON", `{"a":`, nil, false},
		{"Empty", ``, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonx.Decode([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("Decode(%q) error %v, want ok %v", tt.in, err, tt.ok)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"MemberOrderAndSpace", `{"a":1,"b":[true]}`, `{ "b": [ true ], "a": 1 }`, true},
		{"NumbersByText", `{"a":1}`, `{"a":1.0}`, false},
		{"OtherValue", `{"a":1}`, `{"a":2}`, false},
		{"NotJSONSameBytes", `{"a":`, `{"a":`, true},
		{"NotJSONOtherBytes", `{"a":`, `{"a": `, false},
		{"OneNotJSON", `{}`, `{} x`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsonx.Equal([]byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// FuzzDecode holds that a decoded document encodes to a value that decodes
// equal again.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x"]}`, `null`, `{} {}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := jsonx.Decode(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode %#v: %v", v, err)
		}
		if !jsonx.Equal(out, out) || !jsonx.Equal(b, out) {
			t.Fatalf("%q decodes to %#v, which encodes to %q, not equal", b, v, out)
		}
	})
}
