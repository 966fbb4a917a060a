package jsonx_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate/internal/jsonx"
)

// ReadObject names each member unquoted and reads nothing for null;
// another kind, or a member's error, is its error.
func TestReadObject(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the names met, then the texts read
		err      error
	}{
		{"OK", `{"a":"x","b\u0031":"y\n"}`, "a=x b1=y\n ", nil},
		{"Null", `null`, "", nil},
		{"Empty", `{}`, "", nil},
		{"NullText", `{"a":null}`, "a=<null> ", nil},
		{"NotAnObject", `["a"]`, "", jsonx.ErrWantObject},
		{"NotAString", `{"a":1}`, "", jsonx.ErrWantString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := jsontext.NewDecoder(bytes.NewBufferString(tt.in))
			var got bytes.Buffer
			err := jsonx.ReadObject(d, func(name []byte) error {
				got.Write(name)
				text, null, err := jsonx.ReadText(d)
				if null {
					text = []byte("<null>")
				}
				got.WriteString("=" + string(text) + " ")
				return err
			})
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if tt.err == nil && got.String() != tt.want {
				t.Errorf("read %q, want %q", got.String(), tt.want)
			}
		})
	}
}

// Unquote returns a part of its value when there is nothing to unescape,
// and the unescaped text otherwise.
func TestUnquote(t *testing.T) {
	v := jsontext.Value(`"plain"`)
	got, err := jsonx.Unquote(v)
	if err != nil || string(got) != "plain" || &got[0] != &v[1] {
		t.Errorf("Unquote(%s) = %q, %v: want a part of the value", v, got, err)
	}
	if got, err := jsonx.Unquote(jsontext.Value(`"a\"b\u00e9"`)); err != nil || string(got) != "a\"bé" {
		t.Errorf("Unquote of escapes = %q, %v", got, err)
	}
}

// ReadNumber gives a number's text as written and reports null; another
// kind is ErrWantNumber.
func TestReadNumber(t *testing.T) {
	tests := []struct {
		in, want string
		null     bool
		err      error
	}{
		{in: `42`, want: "42"},
		{in: `-1.5e3`, want: "-1.5e3"},
		{in: `null`, null: true},
		{in: `"42"`, err: jsonx.ErrWantNumber},
		{in: `true`, err: jsonx.ErrWantNumber},
		{in: `[1]`, err: jsonx.ErrWantNumber},
	}
	for _, tt := range tests {
		got, null, err := jsonx.ReadNumber(jsontext.NewDecoder(bytes.NewBufferString(tt.in)))
		if !errors.Is(err, tt.err) || null != tt.null || string(got) != tt.want {
			t.Errorf("ReadNumber(%s) = %q, %v, %v; want %q, %v, %v", tt.in, got, null, err, tt.want, tt.null, tt.err)
		}
	}
}
