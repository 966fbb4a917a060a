package substate

import (
	"fmt"
	"unicode/utf8"
)

// QuoteLimit is how many bytes of an id a message quotes.
const QuoteLimit = 64

// QuotePrefix quotes s for a message, its first n bytes only (cut with
// Truncate) and its length when it is longer: a string from input may be
// any length, and a message must stay short. Invalid bytes are shown as
// \x escapes.
func QuotePrefix(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", Truncate(s, n), len(s))
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence:
// when the cut falls inside a rune, it moves back to the rune's start. A
// byte that starts no rune is cut like a character of its own, so a run of
// stray continuation bytes is cut at n, not given up whole. Valid UTF-8
// stays valid: a first rune longer than n gives the empty string. n of 0
// or less is the empty string.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n]
}
