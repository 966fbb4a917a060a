package substate_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/substatehq/substate"
)

func TestValidateTenantID(t *testing.T) {
	tests := []struct {
		name, id, code, rule string
	}{
		{"Slug", "acme-eu", "", ""},
		{"UUID", "3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51", "", ""},
		{"Dots", "acme.eu/prod*>", "", ""},
		{"Accents", "société-générale", "", ""},
		{"LiteralReplacementChar", "bad\uFFFD", "", ""},
		{"MaxBytes", strings.Repeat("a", 256), "", ""},
		{"MaxBytesAccents", strings.Repeat("é", 128), "", ""},
		{"ErrEmpty", "", substate.ENOTENANT, "empty"},
		{"ErrTooLong", strings.Repeat("a", 257), substate.EINVALID, "257 bytes, longer than the maximum of 256"},
		{"Err10KB", strings.Repeat("a", 10_000), substate.EINVALID, "10000 bytes"},
		{"Err700Accents", strings.Repeat("é", 700), substate.EINVALID, "1400 bytes"},
		{"ErrInvalidUTF8", "bad\xff", substate.EINVALID, "not valid UTF-8 (byte 0xFF at offset 3)"},
		{"ErrTruncatedRune", "bad\xc3", substate.EINVALID, "not valid UTF-8 (byte 0xC3 at offset 3)"},
		{"ErrSurrogate", "a\xed\xa0\x80", substate.EINVALID, "not valid UTF-8"},
		{"ErrNewline", "acme\nfake log line", substate.EINVALID, "control character U+000A at offset 4"},
		{"ErrNUL", "a\x00", substate.EINVALID, "U+0000"},
		{"ErrEscape", "\x1b[31mred", substate.EINVALID, "U+001B"},
		{"ErrDEL", "a\x7f", substate.EINVALID, "U+007F"},
		{"ErrC1", "a\u0085", substate.EINVALID, "U+0085"},
		{"ErrBidiOverride", "acme\u202egpj.exe", substate.EINVALID, "invisible format character U+202E at offset 4"},
		{"ErrBidiIsolate", "\u2066acme", substate.EINVALID, "U+2066"},
		{"ErrZeroWidthSpace", "ac\u200bme", substate.EINVALID, "U+200B"},
		{"ErrByteOrderMark", "\ufeffacme", substate.EINVALID, "U+FEFF"},
		{"ErrSoftHyphen", "ac\u00adme", substate.EINVALID, "U+00AD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := substate.ValidateTenantID(tt.id)
			if got := substate.ErrorCode(err); got != tt.code {
				t.Fatalf("ValidateTenantID = %v, want code %q", err, tt.code)
			}
			if err != nil && !strings.Contains(err.Error(), tt.rule) {
				t.Fatalf("error %q does not say %q", err, tt.rule)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Fatalf("error is %d bytes long: %q", len(err.Error()), err)
			}
		})
	}
}

func TestQuotePrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"acme", `"acme"`},
		{"bad\xff", `"bad\xff"`},
		{strings.Repeat("a", 70), `"` + strings.Repeat("a", 64) + `"… (70 bytes)`},
		{"a" + strings.Repeat("é", 40), `"a` + strings.Repeat("é", 31) + `"… (81 bytes)`},
	}
	for _, tt := range tests {
		if got := substate.QuotePrefix(tt.in, 64); got != tt.want {
			t.Errorf("QuotePrefix(%.20q…) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// A valid tenant id always encodes reversibly into a bounded token; an
// invalid one is refused with a short error.
func FuzzValidateTenantID(f *testing.F) {
	for _, s := range []string{"acme", "bad\xff", "a\nb", strings.Repeat("é", 129), "", "a\u202eb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := substate.ValidateTenantID(id)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error is %d bytes long", len(err.Error()))
			}
			return
		}
		if len(id) > substate.MaxTenantIDBytes || !utf8.ValidString(id) {
			t.Fatalf("ValidateTenantID(%q) accepted it", id)
		}
		for _, r := range id {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("ValidateTenantID(%q) accepted %U", id, r)
			}
		}
		tok := substate.EncodeToken(id)
		if back, err := substate.DecodeToken(tok); err != nil || back != id || len(tok) > substate.MaxTokenBytes {
			t.Fatalf("valid id %q: token %q decodes to %q, %v", id, tok, back, err)
		}
	})
}
