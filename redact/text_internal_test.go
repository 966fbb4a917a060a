package redact

import "testing"

// No secret word is longer than maxSecretWord, or isSecretWord would
// never find it.
func TestMaxSecretWord(t *testing.T) {
	for w := range secretWords {
		if len(w) > maxSecretWord {
			t.Errorf("secret word %q is longer than maxSecretWord (%d)", w, maxSecretWord)
		}
	}
}

// FuzzSecretWord holds the ASCII path of secretWord to the Unicode one it
// stands in for.
func FuzzSecretWord(f *testing.F) {
	for _, s := range []string{"password", "DBPass", "apiKEY", "myAPIKeys", "x-Session-Id", "PINs", "cvv2", "tokenizer", "ABCKey", "k", "", "\u212aey"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, w string) {
		gs, gw := secretWord(w)
		ws, ww := secretWordOf(w)
		if gs != ws || gw != ww {
			t.Fatalf("secretWord(%q) = %v, %v; secretWordOf: %v, %v", w, gs, gw, ws, ww)
		}
	})
}

// BenchmarkText is the mapper's cost of redacting an error message with
// no secret in it, the common case.
func BenchmarkText(b *testing.B) {
	const msg = "States.TaskFailed: Lambda.ServiceException: quota exceeded for tenant acme-4711 in eu-west-1 (RequestId: 1b2c)"
	b.ReportAllocs()
	for b.Loop() {
		_ = Text(msg)
	}
}
