package termtext

import (
	"fmt"
	"strings"
)

// Dash is s, or "-" for the empty string: an empty column stays visible.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Clip cuts text to n characters keeping its start, where a message says
// what happened, on one line.
func Clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return Text(s)
}

// Shorten cuts an identifier to n characters keeping its end, where an
// ARN or id differs (error text is cut keeping its start: see Clip).
func Shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		s = "…" + string(r[len(r)-n+1:])
	}
	return Text(s)
}

// Plural is "1 tenant", "2 tenants".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
