package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/redact"
)

// FuzzPayload: whatever the payload, the result is JSON, a policy that
// shows nothing leaves nothing but "[redacted]" and null under the input
// and output members, and redacting again changes nothing.
func FuzzPayload(f *testing.F) {
	for _, name := range fixtures.Providers("*.json") {
		f.Add(fixtures.Provider(name))
	}
	f.Add([]byte(`{"input":{"a":[1,{"password":"x"}]},"b":{"output":"{\"k\":1}"}}`))
	f.Add([]byte(`not json`))
	nothing, err := redact.New(nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := nothing.Payload(body)
		if !json.Valid(out) {
			t.Fatalf("not JSON: %q", out)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		if leak := leaked(v, false); leak != "" {
			t.Fatalf("%q shows %q under an input or output member", out, leak)
		}
		if again := nothing.Payload(out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%s\n%s", out, again)
		}
	})
}

// leaked returns a value under a payload member that is not redacted.
func leaked(v any, under bool) string {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			isMember := false
			for _, m := range redact.PayloadMembers {
				isMember = isMember || strings.EqualFold(k, m)
			}
			if s := leaked(c, under || isMember); s != "" {
				return s
			}
		}
	case []any:
		for _, c := range v {
			if s := leaked(c, under); s != "" {
				return s
			}
		}
	case nil:
	case string:
		if under && v != redact.Redacted {
			return v
		}
	default:
		if under {
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	return ""
}

// FuzzJSONText: with any allow path, the result is [redacted] or JSON in
// which no secret-looking member shows a value.
func FuzzJSONText(f *testing.F) {
	f.Add(`{"a":{"password":"x","b":1}}`, "$")
	f.Add(`{"items":[{"token":"t","sku":"A"}]}`, "$.items[*]")
	f.Add(`[1,2,{"key":[3]}]`, "$..*")
	f.Fuzz(func(t *testing.T, doc, path string) {
		p, err := redact.New([]string{path}, nil)
		if err != nil {
			return
		}
		out := p.JSONText(doc)
		if out == redact.Redacted {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("not JSON: %q", out)
		}
		if s := secretShown(v); s != "" {
			t.Fatalf("%q (allowing %s) shows secret member %q", out, path, s)
		}
	})
}

func secretShown(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if redact.SecretName(k) && c != redact.Redacted {
				return k
			}
			if s := secretShown(c); s != "" {
				return s
			}
		}
	case []any:
		for _, c := range v {
			if s := secretShown(c); s != "" {
				return s
			}
		}
	}
	return ""
}
