package substate_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/substatehq/substate"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"Short", "acme", 8, "acme"},
		{"Exact", "acme", 4, "acme"},
		{"ASCII", "acme", 2, "ac"},
		{"Zero", "acme", 0, ""},
		{"Negative", "acme", -1, ""},
		{"Empty", "", 3, ""},
		{"TwoByteRuneKept", "aé", 3, "aé"},
		{"TwoByteRuneNotSplit", "aéb", 2, "a"},
		{"ThreeByteRuneNotSplit", "a€b", 3, "a"},
		{"FourByteRuneNotSplit", "a😀b", 4, "a"},
		{"FourByteRuneKept", "a😀b", 5, "a😀"},
		{"RunOfRunes", strings.Repeat("é", 256), 255, strings.Repeat("é", 127)},
		{"InvalidByteIsOneCharacter", "ab\xffcd", 3, "ab\xff"},
		// The first rune does not fit: nothing of it is kept.
		{"FirstRuneLongerThanN", "é", 1, ""},
		{"FirstRuneLongerThanNEmoji", "😀x", 3, ""},
		// A run of continuation bytes starts no rune: the cut does not
		// walk back through it looking for one.
		{"StrayContinuationBytes", "a" + strings.Repeat("\x80", 9), 6, "a\x80\x80\x80\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := substate.Truncate(tt.in, tt.n); got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

// FuzzTruncate holds Truncate's promises: at most n bytes, a prefix of s,
// valid UTF-8 kept valid, and no more than a rune's worth given up.
func FuzzTruncate(f *testing.F) {
	for _, s := range []string{"acme", "aé€😀", "a\x80\x80\x80\x80", "\xff\xfe"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := substate.Truncate(s, n)
		switch {
		case len(got) > max(n, 0):
			t.Fatalf("Truncate(%q, %d) = %q: longer than %d bytes", s, n, got, n)
		case !strings.HasPrefix(s, got):
			t.Fatalf("Truncate(%q, %d) = %q: not a prefix", s, n, got)
		case utf8.ValidString(s) && !utf8.ValidString(got):
			t.Fatalf("Truncate(%q, %d) = %q: splits a rune", s, n, got)
		case n > 0 && len(s) > len(got) && len(got) < min(n, len(s))-utf8.UTFMax+1:
			t.Fatalf("Truncate(%q, %d) = %q: cut more than a rune short", s, n, got)
		}
	})
}
