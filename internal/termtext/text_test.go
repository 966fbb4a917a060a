package termtext

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestCutText(t *testing.T) {
	msg := "downstream unavailable (attempt 3)\nError: downstream unavailable (attempt 3)\n    at Object.<anonymous> (service.js:66:50)"
	if got, want := Clip(msg, 40), "downstream unavailable (attempt 3) Erro…"; got != want {
		t.Errorf("Clip = %q, want %q: an error keeps its start", got, want)
	}
	arn := "arn:aws:states:us-east-1:123456789012:execution:orders:ord-2024-000124"
	if got, want := Shorten(arn, 20), "…ers:ord-2024-000124"; got != want {
		t.Errorf("Shorten = %q, want %q: an id keeps its end", got, want)
	}
	if got := Clip("café déjà vu", 6); got != "café …" {
		t.Errorf("Clip cuts runes, not bytes: %q", got)
	}
}

func TestTermText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"acme", "acme"},
		{"café déjà vu", "café déjà vu"},
		{`C:\path`, `C:\path`},
		{"evil\x1b[2J", `evil\x1b[2J`},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"ok\rFAKE", `ok\rFAKE`},
		{"a\nb\tc", `a\nb\tc`},
		{"del\x7f c1\u009b", `del\x7f c1\x9b`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := Lines("first\x1b[31m\nsecond\tcol\r"), "first\\x1b[31m\nsecond\tcol\\r"; got != want {
		t.Errorf("Lines = %q, want %q: line breaks and tabs stay", got, want)
	}
}

func FuzzTermText(f *testing.F) {
	for _, s := range []string{"acme", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "\r\n\t", "\u202e\u2066", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if r < 0x20 || r >= 0x7f && r < 0xa0 || unsafeRune(r) {
				t.Fatalf("Text(%q) = %q keeps %U", s, got, r)
			}
		}
		if !needsEscape(s) && got != s {
			t.Fatalf("Text changed safe text %q to %q", s, got)
		}
	})
}

func TestTermJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string]string{"e": "del\x7f c1\u009b rlo\u202e esc\x1b"}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "{\n  \"e\": \"del\\u007f c1\\u009b rlo\\u202e esc\\u001b\"\n}\n"; got != want {
		t.Errorf("WriteJSON = %q, want %q", got, want)
	}
	if got, want := JSONLine([]byte("{\"e\": \"del\x7f bad\xff\"}")), `{"e":"del\u007f bad\ufffd"}`; got != want {
		t.Errorf("JSONLine = %q, want %q", got, want)
	}
}

// FuzzTermJSON: JSON through JSON (WriteJSON) and JSONLine is still
// JSON, reads the same, and holds nothing a terminal acts on.
func FuzzTermJSON(f *testing.F) {
	for _, s := range []string{"acme", "\x1b]8;;http://x\x07link", "del\x7f c1\u009b", "\u202e\u2066\u2028", "\xff\xfe", `back\slash "q"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, _ := json.Marshal(map[string]string{"s": s})
		var want map[string]string
		if err := json.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		for _, got := range []string{JSON(string(doc)), JSONLine(doc)} {
			var back map[string]string
			if err := json.Unmarshal([]byte(got), &back); err != nil {
				t.Fatalf("%q became %q, not JSON: %v", doc, got, err)
			}
			if back["s"] != want["s"] {
				t.Fatalf("%q became %q, which reads %q, want %q", doc, got, back["s"], want["s"])
			}
			for _, r := range got {
				if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 || unsafeRune(r) {
					t.Fatalf("%q became %q, which keeps %U", doc, got, r)
				}
			}
		}
	})
}
