package mapping

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// errorKind is the error type as a fingerprint holds it, by its
// definition: invalid UTF-8 replaced, lower-cased, blank runs collapsed to
// one space and trimmed, "/" written "_", cut to maxErrorKind bytes.
func errorKind(t string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(strings.ToValidUTF8(t, "\uFFFD")) {
		if blank(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return substate.Truncate(strings.ReplaceAll(b.String(), "/", "_"), maxErrorKind)
}

// FuzzFingerprintParts checks the in-place writers Fingerprint uses
// against what they stand for: appendErrorKind against errorKind's
// definition, templateAfter a head against the template alone, and
// Fingerprint against the head and template put together.
func FuzzFingerprintParts(f *testing.F) {
	for _, s := range [][2]string{
		{"States.TaskFailed", "quota exceeded for tenant t-42 in eu-west-1"},
		{"  Lambda/Unhandled\t\tError ", "Task timed out after 30.00 seconds"},
		{strings.Repeat("a", 63) + " b", "x"},
		{strings.Repeat("A", 62) + "\x7f\x00 /Z", "'quoted' at start"},
		{strings.Repeat("ab ", 40), "5 items " + strings.Repeat("w", 300)},
		{"Ünïcode Type", "\xff\u00a0K 0xdeadbeef"},
		{"Bad\xe2\x82\xffType \uFFFD\xff/İ" + strings.Repeat("é", 40), "x"},
		{strings.Repeat("a", 62) + " é", "x"},
		{strings.Repeat("a", 63) + "\u00a0\u200bb", "x"},
		{strings.Repeat("a", 64) + " b", "x"},
		{"", "arn:aws:states:us-east-1:123456789012:execution:sm:x"},
		{"T", " \t leading blanks"},
	} {
		f.Add(s[0], s[1], "stepfunctions/x")
	}
	f.Fuzz(func(t *testing.T, typ, msg, head string) {
		if got, want := string(appendErrorKind([]byte(head), typ)), head+errorKind(typ); got != want {
			t.Fatalf("appendErrorKind(%q, %q) = %q, want %q", head, typ, got, want)
		}
		budget := max(MaxFingerprint-len(head), 0)
		if got, want := templateAfter([]byte(head), msg, budget), head+template(msg, budget); got != want {
			t.Fatalf("templateAfter(%q, %q, %d) = %q, want %q", head, msg, budget, got, want)
		}
		if strings.TrimSpace(msg) == "" {
			return
		}
		for _, p := range substate.Providers {
			h := string(p) + "/" + errorKind(typ) + "/"
			if got, want := Fingerprint(p, typ, msg), h+template(msg, MaxFingerprint-len(h)); got != want {
				t.Fatalf("Fingerprint(%q, %q, %q) = %q, want %q", p, typ, msg, got, want)
			}
		}
	})
}
