package mapping

import "strings"

// The recognizers of what a template replaces: character classes, and the
// timestamps, UUIDs, ARNs, numbers, hex strings and ids a word can be.

// isWord reports a character of a word: the message is lower-cased.
func isWord(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' }

// wordish counts the angle brackets of placeholders as word characters,
// so that a quote next to a placeholder reads as it did next to the word
// the placeholder replaced.
func wordish(c byte) bool { return isWord(c) || c == '<' || c == '>' }

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

func quoteIndex(c byte) int {
	switch c {
	case '"':
		return 0
	case '\'':
		return 1
	}
	return 2
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }

func wordLen(s string) int {
	n := 0
	for n < len(s) && isWord(s[n]) {
		n++
	}
	return n
}

func digitsLen(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// numberLen is the length of the number that starts s: digit groups
// joined by "." or "," (3.14, 1,500, 10.0.0.1). What follows its last
// digit in the same word (the s of 1.5s) starts a word of its own.
func numberLen(s string) int {
	n := digitsLen(s)
	for n+1 < len(s) && (s[n] == '.' || s[n] == ',') && isDigit(s[n+1]) {
		n += 1 + digitsLen(s[n+1:])
	}
	return n
}

// isHex reports a hex string: 0x and hex digits, or at least 8 hex digits
// with at least one digit and one letter.
func isHex(w string) bool {
	if rest, ok := strings.CutPrefix(w, "0x"); ok && rest != "" && strings.Trim(rest, "0123456789abcdef") == "" {
		return true
	}
	if len(w) < 8 || strings.Trim(w, "0123456789abcdef") != "" {
		return false
	}
	return strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef")
}

// isID reports an id-like word: a Restate invocation id, or at least 8
// letters and digits with at least 3 digits.
func isID(w string) bool {
	if strings.HasPrefix(w, "inv_") && len(w) >= 20 {
		return true
	}
	if len(w) < 8 {
		return false
	}
	digits, letters := 0, 0
	for i := range len(w) {
		switch c := w[i]; {
		case isDigit(c):
			digits++
		case c != '_':
			letters++
		}
	}
	return digits >= 3 && letters > 0
}

// timestampLen is the length of the timestamp that starts s: a date
// (2024-06-19) with an optional time of day, or a time of day with
// seconds (10:01:05.123), either with an optional zone; 0 when s starts
// with none or a word character follows it.
func timestampLen(s string) int {
	n := dateLen(s)
	switch {
	case n > 0:
		if n+1 < len(s) && (s[n] == 't' || s[n] == ' ') {
			if m, _ := clockLen(s[n+1:]); m > 0 {
				n += 1 + m
				n += zoneLen(s[n:])
			}
		}
	default:
		m, seconds := clockLen(s)
		if m == 0 || !seconds {
			return 0
		}
		n = m + zoneLen(s[m:])
	}
	if n < len(s) && isWord(s[n]) {
		return 0
	}
	return n
}

// dateLen is 10 when s starts with a date yyyy-mm-dd, else 0.
func dateLen(s string) int {
	if len(s) < 10 || !digitsAt(s, 0, 4) || s[4] != '-' || !digitsAt(s, 5, 2) || s[7] != '-' || !digitsAt(s, 8, 2) {
		return 0
	}
	return 10
}

// clockLen is the length of the time of day hh:mm[:ss[.fraction]] that
// starts s, and whether it has seconds.
func clockLen(s string) (int, bool) {
	if len(s) < 5 || !digitsAt(s, 0, 2) || s[2] != ':' || !digitsAt(s, 3, 2) {
		return 0, false
	}
	if len(s) < 8 || s[5] != ':' || !digitsAt(s, 6, 2) {
		return 5, false
	}
	n := 8
	if n+1 < len(s) && s[n] == '.' && isDigit(s[n+1]) {
		n += 1 + digitsLen(s[n+1:])
	}
	return n, true
}

// zoneLen is the length of the zone that starts s: z, or +hh, +hhmm,
// +hh:mm (or -).
func zoneLen(s string) int {
	switch {
	case s == "":
		return 0
	case s[0] == 'z':
		return 1
	case s[0] != '+' && s[0] != '-' || !digitsAt(s, 1, 2):
		return 0
	case digitsAt(s, 3, 2):
		return 5
	case len(s) > 3 && s[3] == ':' && digitsAt(s, 4, 2):
		return 6
	}
	return 3
}

// digitsAt reports whether s holds n digits at i.
func digitsAt(s string, i, n int) bool {
	return len(s) >= i+n && digitsLen(s[i:i+n]) == n
}

// uuidLen is 36 when s starts with a UUID (8-4-4-4-12 hex digits) that no
// word character follows, else 0.
func uuidLen(s string) int {
	if len(s) < 36 || len(s) > 36 && isWord(s[36]) {
		return 0
	}
	for i := range 36 {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return 0
			}
		default:
			if !isHexDigit(s[i]) {
				return 0
			}
		}
	}
	return 36
}

// arnLen is the length of the ARN that starts s (arn:…, up to a blank, a
// quote, a bracket or ",;", without a final "." or ":"), 0 when s starts
// with none.
func arnLen(s string) int {
	if !strings.HasPrefix(s, "arn:") {
		return 0
	}
	n := len("arn:")
	for n < len(s) && !strings.ContainsRune(" \t\"'`,;()[]{}<>", rune(s[n])) && s[n] > ' ' && s[n] < 0x7f {
		n++
	}
	for n > len("arn:") && (s[n-1] == '.' || s[n-1] == ':') {
		n--
	}
	if n == len("arn:") {
		return 0
	}
	return n
}
