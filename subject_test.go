package substate_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

func TestEncodeToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"tenant-1", "tenant-1"},
		{"acme.eu", "acme~2Eeu"},
		{"a b*>", "a~20b~2A~3E"},
		{"~", "~7E"},
		{"", "~"},
		{"é", "~C3~A9"},
		{"bad\xff", "bad~FF"},
		{"bad\xfe", "bad~FE"},
		{strings.Repeat("a", 768), strings.Repeat("a", 768)},
		{strings.Repeat("é", 128), strings.Repeat("~C3~A9", 128)},
		{strings.Repeat(".", 256), strings.Repeat("~2E", 256)},
	}
	for _, tt := range tests {
		got := substate.EncodeToken(tt.in)
		if got != tt.want {
			t.Errorf("EncodeToken(%s) = %s, want %s", substate.QuotePrefix(tt.in, 64), substate.QuotePrefix(got, 64), substate.QuotePrefix(tt.want, 64))
		}
		back, err := substate.DecodeToken(got)
		if err != nil || back != tt.in {
			t.Errorf("DecodeToken(%s) = %s, %v; want %s", substate.QuotePrefix(got, 64), substate.QuotePrefix(back, 64), err, substate.QuotePrefix(tt.in, 64))
		}
	}
	for _, bad := range []string{"~4", "~zz", "a~", "~41", strings.Repeat("a", 769), "a~~0123"} {
		if _, err := substate.DecodeToken(bad); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("DecodeToken(%s) = %v, want an EINVALID error", substate.QuotePrefix(bad, 64), err)
		}
	}
}

// Ids whose encoding would pass MaxTokenBytes get a bounded digest token:
// the readable encoded prefix, "~~" and a hash.
func TestEncodeTokenDigest(t *testing.T) {
	tests := []struct {
		name, in, prefix string
	}{
		{"10KB", strings.Repeat("a", 10_000), strings.Repeat("a", 64)},
		{"769Plain", strings.Repeat("a", 769), strings.Repeat("a", 64)},
		{"700Accents", strings.Repeat("é", 700), strings.Repeat("~C3~A9", 32)},
		{"CutAtRune", "x" + strings.Repeat("é", 400), "x" + strings.Repeat("~C3~A9", 31)},
		{"Dots", strings.Repeat(".", 257), strings.Repeat("~2E", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := substate.EncodeToken(tt.in)
			head, sum, ok := strings.Cut(tok, "~~")
			if !ok || head != tt.prefix || len(sum) != 32 || strings.Trim(sum, "0123456789abcdef") != "" {
				t.Fatalf("EncodeToken = %q, want %q~~ and 32 hex digits", tok, tt.prefix)
			}
			if len(tok) > substate.MaxTokenBytes {
				t.Fatalf("token is %d bytes, above %d", len(tok), substate.MaxTokenBytes)
			}
			if other := substate.EncodeToken(tt.in + "b"); other == tok {
				t.Fatalf("two ids share the digest token %q", tok)
			}
			if _, err := substate.DecodeToken(tok); substate.ErrorCode(err) != substate.EINVALID ||
				!strings.Contains(err.Error(), "digest") {
				t.Fatalf("DecodeToken(digest) = %v, want an EINVALID error naming the digest", err)
			}
		})
	}
}

func TestSubjectsBounded(t *testing.T) {
	long := strings.Repeat("é", 5000)
	change := &substate.Change{TenantID: long, New: substate.TenantView{Provider: substate.Provider(long)}}
	for _, subject := range []string{
		substate.EventsSubject(long), substate.ChangeSubject(change), substate.DLQSubject(long),
		substate.TaskSubject(long, long),
	} {
		if len(subject) > 2*substate.MaxTokenBytes+len(substate.SubjectTasksPrefix)+1 {
			t.Errorf("subject of %d bytes from a 10,000-byte id", len(subject))
		}
	}
}

func FuzzEncodeToken(f *testing.F) {
	for _, s := range []string{"tenant", "a.b", "*", ">", " ", "~7E", "", "bad\xff", "a~~b",
		strings.Repeat("é", 129), strings.Repeat("a", 769)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := substate.EncodeToken(s)
		if len(tok) > substate.MaxTokenBytes {
			t.Fatalf("EncodeToken(%q) is %d bytes, above %d", s, len(tok), substate.MaxTokenBytes)
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c == '.' || c == '*' || c == '>' || c <= ' ' || c >= 0x7f {
				t.Fatalf("EncodeToken(%q) = %q has byte %q", s, tok, c)
			}
		}
		back, err := substate.DecodeToken(tok)
		switch {
		case len(s) <= substate.MaxTenantIDBytes && (err != nil || back != s):
			t.Fatalf("round trip %q -> %q -> %q, %v", s, tok, back, err)
		case err == nil && back != s:
			t.Fatalf("DecodeToken(EncodeToken(%q)) = %q", s, back)
		}
		_, _ = substate.DecodeToken(s) // must not panic
	})
}
