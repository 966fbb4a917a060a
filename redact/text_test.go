package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/substatehq/substate/redact"
)

// Secrets in free text lose their values; the rest of the text, and
// everyday words that only look like secret names, stay.
func TestText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"PasswordSpace", "connect failed: password hunter2 rejected", "connect failed: password [redacted] rejected"},
		{"PasswordEquals", "login password=hunter2; retrying", "login password=[redacted]; retrying"},
		{"PasswordColon", "dbPassword: hunter2", "dbPassword: [redacted]"},
		{"JSON", `{"user":"app","password":"hunter2","n":1}`, `{"user":"app","password":"[redacted]","n":1}`},
		{"JSONEscapes", `{"token":"a\"b","x":2}`, `{"token":"[redacted]","x":2}`},
		{"Bearer", "401 from upstream: Authorization: Bearer eyJhbGciOi.x.y", "401 from upstream: Authorization: [redacted] [redacted]"},
		{"BearerAlone", "sent Bearer abc123 and was refused", "sent Bearer [redacted] and was refused"},
		{"APIKeyTied", "stripe error (api_key=sk_live_abc)", "stripe error (api_key=[redacted])"},
		{"StripeKeyJSON", `{"stripeKey":"sk_live_abc"}`, `{"stripeKey":"[redacted]"}`},
		{"WeakWordUntied", "duplicate key value violates unique constraint", "duplicate key value violates unique constraint"},
		{"PinTied", "card declined, pin: 1234", "card declined, pin: [redacted]"},
		{"SessionUntied", "session expired after 30m", "session expired after 30m"},
		{"URLPassword", "dial postgres://app:hunter2@db.internal:5432/orders: timeout", "dial postgres://app:[redacted]@db.internal:5432/orders: timeout"},
		{"URLUserOnly", "GET https://user@example.com/x failed", "GET https://user@example.com/x failed"},
		{"NotAWord", "passport check failed for monkey keyboard", "passport check failed for monkey keyboard"},
		{"SecretAtEnd", "missing secret", "missing secret"},
		{"SecretColonAtEnd", "secret:", "secret:"},
		{"Unterminated", `password: "hunter2`, `password: [redacted]`},
		{"Plain", "[500] downstream unavailable", "[500] downstream unavailable"},
		{"Empty", "", ""},
		{"Accents", "mot de passe: clé=secret-é", "mot de passe: clé=secret-é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redact.Text(tc.in); got != tc.want {
				t.Fatalf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzText: whatever the text, Text of its result changes nothing, valid
// UTF-8 stays valid, and a password after "password " never survives.
func FuzzText(f *testing.F) {
	for _, s := range []string{"password hunter2", `{"token":"x"}`, "Authorization: Bearer a b", "pin: 1", "postgres://a:b@c", "x", `"secret":"\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := redact.Text(s)
		if again := redact.Text(out); again != out {
			t.Fatalf("not idempotent:\n%q\n%q\n%q", s, out, again)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q is not UTF-8", s, out)
		}
		if in := "password zz" + s; strings.Contains(redact.Text(in), "password zz") {
			t.Fatalf("Text(%q) kept the password", in)
		}
	})
}
