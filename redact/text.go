package redact

import (
	"regexp"
	"strings"
)

// Text returns free text (a provider's error message: a Step Functions
// cause, a Restate last_failure) with the values its secret-looking words
// name replaced by [redacted], as Policy.Value redacts a member whose name
// looks secret:
//
//   - after a word that contains password, secret, token, credential,
//     apikey, authorization, privatekey, signature or bearer (SecretName's
//     parts), the next token, whether it follows ":", "=" or only a space:
//     "password hunter2", "token=abc", "Authorization: Bearer abc" (a
//     scheme such as Bearer and its credential both);
//   - after a word that is key, pwd, pass, auth, pin, cvv, cvc, ssn, otp,
//     session or cookie (SecretName's words, which are also everyday
//     words), the next token only when ":" or "=" ties them: "pin: 1234",
//     "api_key=sk_live_1", not "duplicate key value";
//   - the password of a URL's user information: "postgres://app:[redacted]@db".
//
// A quoted value is redacted up to its closing quote, so JSON inside the
// text ({"password":"hunter2"}) is too. Everything else is kept as it was;
// Text of its own result returns it unchanged.
func Text(s string) string {
	if s == "" {
		return s
	}
	if strings.Contains(s, "://") {
		s = urlPassword.ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	var b strings.Builder // empty until the first secret: most texts have none
	for i := 0; i < len(s); {
		w, end := wordAt(s, i)
		if w == "" {
			if b.Len() > 0 {
				b.WriteByte(s[i])
			}
			i++
			continue
		}
		if b.Len() > 0 {
			b.WriteString(w)
		}
		i = end
		if strong, weak := secretWord(w); strong || weak {
			if b.Len() == 0 {
				b.Grow(len(s) + len(Redacted))
				b.WriteString(s[:end]) // what was kept up to here: s itself
			}
			i = redactValue(&b, s, i, strong)
		}
	}
	if b.Len() == 0 {
		return s
	}
	return b.String()
}

// urlPassword is the user information of a URL with a password.
var urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"']*:)[^\s/@"']+@`)

// authSchemes are the words that start an Authorization value: the
// credential follows them.
var authSchemes = map[string]bool{"bearer": true, "basic": true, "digest": true, "token": true}

// secretWord reports whether a word names a secret: strong when one of
// SecretName's parts is in it, weak when it is one of its words only.
func secretWord(w string) (strong, weak bool) {
	if !isASCII(w) {
		return secretWordOf(w)
	}
	for _, part := range secretParts {
		if containsFold(w, part) {
			return true, false
		}
	}
	return false, asciiSecretWord(w)
}

// secretWordOf is secretWord for any text: it lowers the word as Unicode
// does (the Kelvin sign lowers to k) before looking at its parts.
func secretWordOf(w string) (strong, weak bool) {
	lower := strings.ToLower(w)
	for _, part := range secretParts {
		if strings.Contains(lower, part) {
			return true, false
		}
	}
	for _, word := range words(w) {
		if secretWords[word] {
			return false, true
		}
	}
	return false, false
}

// isASCII reports whether s has no byte above 0x7f.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// containsFold reports whether the ASCII text s contains the lower-case
// ASCII part in any case.
func containsFold(s, part string) bool {
	for i := 0; i+len(part) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(part)], part) {
			return true
		}
	}
	return false
}

// asciiSecretWord reports whether one of the words of the ASCII text s,
// split as words splits them, is one of secretWords.
func asciiSecretWord(s string) bool {
	start := -1
	for i := 0; i <= len(s); i++ {
		if start >= 0 && (i == len(s) || wordBreak(s, i)) {
			if isSecretWord(s[start:i]) {
				return true
			}
			start = -1
		}
		if i < len(s) && isLetter(s[i]) && start < 0 {
			start = i
		}
	}
	return false
}

// wordBreak reports whether a word of s that has begun ends before s[i]:
// at a byte that is not a letter, or at a capital after a small letter
// or before one (dbPass, APIKey).
func wordBreak(s string, i int) bool {
	c := s[i]
	if !isLetter(c) {
		return true
	}
	if c < 'A' || c > 'Z' {
		return false
	}
	prevLower := s[i-1] >= 'a' && s[i-1] <= 'z'
	prevUpper := s[i-1] >= 'A' && s[i-1] <= 'Z'
	nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
	return prevLower || prevUpper && nextLower
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isSecretWord looks the ASCII word w up in secretWords in lower case,
// on the stack.
func isSecretWord(w string) bool {
	var buf [maxSecretWord]byte
	if len(w) > len(buf) {
		return false
	}
	for i := 0; i < len(w); i++ {
		buf[i] = lowerASCII(w[i])
	}
	return secretWords[string(buf[:len(w)])]
}

// maxSecretWord is the length of the longest of secretWords.
const maxSecretWord = 7

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// redactValue writes what follows a secret word at s[i:]: the separator
// kept, the value replaced. A weak word needs ":" or "=" before its value.
// It returns where the text goes on.
func redactValue(b *strings.Builder, s string, i int, strong bool) int {
	j := i
	if j < len(s) && (s[j] == '"' || s[j] == '\'') { // the closing quote of a JSON name
		j++
	}
	j = skipSpaces(s, j)
	tied := j < len(s) && (s[j] == ':' || s[j] == '=')
	if tied {
		j++
		if j < len(s) && (s[j] == '=' || s[j] == '>') { // := and =>
			j++
		}
		j = skipSpaces(s, j)
	}
	if !tied && (!strong || j == i) {
		return i // a weak word not tied to a value, or a strong one not followed by a space
	}
	start, end, quoted := valueAt(s, j)
	if end == start {
		return i
	}
	b.WriteString(s[i:start])
	if quoted {
		b.WriteString(s[start:start+1] + Redacted + s[end-1:end])
	} else {
		b.WriteString(Redacted)
	}
	if !quoted && authSchemes[strings.ToLower(s[start:end])] {
		return redactValue(b, s, end, true)
	}
	return end
}

// valueAt returns the bounds of the value at s[j:]: a quoted string with
// its quotes, or a run of characters up to a space or punctuation that
// ends a value in text and JSON.
func valueAt(s string, j int) (start, end int, quoted bool) {
	if strings.HasPrefix(s[j:], Redacted) {
		return j, j + len(Redacted), false
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		q := s[j]
		for k := j + 1; k < len(s); k++ {
			switch s[k] {
			case '\\':
				k++
			case q:
				return j, k + 1, true
			}
		}
		return j, len(s), false // unterminated: all of it
	}
	k := j
	for k < len(s) && !strings.ContainsRune(" \t\r\n,;)}]\"'", rune(s[k])) {
		k++
	}
	return j, k, false
}

// wordAt returns the word at s[i:] (letters, digits, "_", "-", "."), and
// where it ends; "" when none starts there or s[i] continues a word.
func wordAt(s string, i int) (string, int) {
	if i > 0 && isWordByte(s[i-1]) {
		return "", i
	}
	j := i
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	return s[i:j], j
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c >= 0x80
}

func skipSpaces(s string, j int) int {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j
}
