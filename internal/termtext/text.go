// Package termtext prints for people at a terminal: text made safe to
// show (Text, Lines, JSON), cut to a column (Clip, Shorten, Dash), aligned
// tables, indented JSON and YAML, a progress line rewritten in place, and
// the Printer every command prints its records with, in the format of its
// -o flag (table, wide, json, yaml).
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s safe to print on a terminal: every control
// character (C0, DEL, C1), every bidirectional-text control and the
// Unicode line and paragraph separators are written as escapes (ESC as
// \x1b, CR as \r, U+202E as \u202e), and bytes that are not UTF-8 as \xNN.
// Tenant ids, error messages and provider states come from providers and
// from whoever may publish an event: printed raw, an ESC or OSC sequence
// would move the cursor, rewrite earlier lines, retitle the window or
// hide text, and a CR would overwrite the line it is on. Everything else,
// backslashes included, is printed as it is.
func Text(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether Text changes s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0x100 && unicode.IsControl(r) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune reports whether r above Latin-1 changes how a terminal lays
// out the text around it: bidirectional controls (which can reorder what
// is shown, as in "Trojan Source") and the line and paragraph separators.
func unsafeRune(r rune) bool {
	return r >= 0x100 && (unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029')
}

// Lines is Text for text of several lines: line breaks and tabs
// stay as they are, everything else Text escapes is escaped. Error
// messages go through it.
func Lines(s string) string {
	if !needsEscape(s) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j := range parts {
			parts[j] = Text(parts[j])
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// JSON is Text for JSON text: what Text escapes is written
// as a JSON escape instead (DEL as \u007f, U+009B as \u009b, U+202E as
// \u202e) and a byte that is not UTF-8 as \ufffd, so the output is still
// the same JSON, for jq as for a terminal. In JSON such characters can
// only be inside strings; line breaks and tabs (indentation) stay.
// encoding/json escapes C0 controls itself, but not DEL, the C1 controls
// or the bidirectional ones, and json.Compact passes through whatever a
// publisher sent.
func JSON(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r < 0x100 && unicode.IsControl(r) || unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}
