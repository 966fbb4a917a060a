package mapping

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/substatehq/substate"
)

// MaxFingerprint is the longest error fingerprint, in bytes.
const MaxFingerprint = substate.MaxFingerprintBytes

// Bounds of the parts of a fingerprint.
const (
	maxErrorKind     = 64      // bytes of the error type kept
	maxTemplateInput = 4 << 10 // bytes of the message read
)

// Fingerprint returns the error fingerprint of an error: the key that
// groups the tenants one fault hit, "provider/errorType/template". The
// template is the message with what differs from one occurrence to the
// next replaced by placeholders (see Template); the error type is the
// provider's, lower-cased, its whitespace collapsed and a "/" written as
// "_", cut to 64 bytes. The whole is at most MaxFingerprint bytes, cut at
// a word boundary. It is "" when the message is blank: the view's error
// is its message, and a tenant without one has no fingerprint.
func Fingerprint(p substate.Provider, errorType, message string) string {
	if strings.TrimSpace(message) == "" {
		return ""
	}
	var buf [2*maxErrorKind + 16]byte // the head, on the stack
	head := append(buf[:0], p...)
	head = append(head, '/')
	head = appendErrorKind(head, errorType)
	head = append(head, '/')
	return templateAfter(head, message, MaxFingerprint-len(head))
}

// Template returns the template of an error message, at most
// MaxFingerprint bytes: lower-cased, whitespace, control and format characters
// collapsed to one space, and these replaced by placeholders —
//
//   - a quoted value ('…', "…" or `…`): <q>
//   - a timestamp (2024-06-19, 2024-06-19T10:01:05.123Z, 10:01:05): <time>
//   - an ARN (arn:…): <arn>
//   - a UUID, a Restate invocation id (inv_…), and a word of at least 8
//     letters and digits with at least 3 digits: <id>
//   - a hex string (0x…, or at least 8 hex digits with a digit and a
//     letter): <hex>
//   - a number (digits, with "." or "," between digit groups): <n>; the
//     digits that start a word (30s), not those inside one (s3, sha256).
//
// Templating a template changes nothing.
func Template(message string) string { return template(message, MaxFingerprint) }

// appendErrorKind appends the error type as a fingerprint holds it, in
// one pass: a run of invalid UTF-8 as one U+FFFD (as strings.ToValidUTF8
// writes it), lower-cased rune by rune (as strings.ToLower), each run of
// blank runes one space and none at either end, "/" written "_", and cut
// at maxErrorKind bytes before the first rune that does not fit (as
// substate.Truncate cuts).
func appendErrorKind(dst []byte, t string) []byte {
	start, space, invalid := len(dst), false, false
	for i := 0; i < len(t); {
		r, n := rune(t[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(t[i:])
		}
		i += n
		if r == utf8.RuneError && n == 1 {
			if invalid {
				continue // the run's U+FFFD is written
			}
			invalid = true
		} else {
			invalid = false
		}
		if r = unicode.ToLower(r); blank(r) {
			space = len(dst) > start
			continue
		}
		if r == '/' {
			r = '_'
		}
		if space {
			if len(dst)-start+1 > maxErrorKind {
				return dst
			}
			dst, space = append(dst, ' '), false
		}
		if len(dst)-start+utf8.RuneLen(r) > maxErrorKind {
			return dst
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// blank reports a rune that templates collapse: whitespace, controls,
// and the invisible format characters (bidirectional overrides, zero
// widths) that would make two equal-looking fingerprints differ.
func blank(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// template returns the template of message, at most budget bytes.
func template(message string, budget int) string { return templateAfter(nil, message, budget) }

// templateAfter returns head followed by the template of message, at most
// budget bytes, made in one allocation (two when the message has to be
// lower-cased). The templater looks only at what it wrote itself, not at
// the head.
func templateAfter(head []byte, message string, budget int) string {
	s := strings.ToLower(strings.ToValidUTF8(substate.Truncate(message, maxTemplateInput), "\uFFFD"))
	t := templater{s: s, base: len(head), budget: budget}
	t.out.Grow(len(head) + min(len(s), budget) + 8)
	t.out.Write(head)
	t.run()
	return t.result()
}

// templater scans a lower-cased message once, left to right, writing the
// template to out. Every decision about what precedes a position looks at
// out, not at the message, so that templating a template sees what the
// first pass saw.
type templater struct {
	s       string
	i       int
	out     strings.Builder // the head, then the template from base on
	base    int
	budget  int
	space   bool   // whitespace seen since the last output
	noClose [3]int // per quote character, 1 + where an opener found no closer; 0: none yet
}

func (t *templater) run() {
	for t.i < len(t.s) && t.out.Len()-t.base <= t.budget {
		c := t.s[t.i]
		if c < utf8.RuneSelf {
			if c == ' ' || c < 0x20 || c == 0x7f {
				t.space, t.i = true, t.i+1
				continue
			}
			t.token()
			continue
		}
		r, n := utf8.DecodeRuneInString(t.s[t.i:])
		if blank(r) {
			t.space = true
		} else {
			t.write(t.s[t.i : t.i+n])
		}
		t.i += n
	}
}

// token writes what starts at t.i, an ASCII character that is not blank.
func (t *templater) token() {
	c := t.s[t.i]
	switch {
	case isQuote(c) && !wordish(t.last()):
		if end := t.closer(c); end > 0 {
			t.emit("<q>", end+1)
			return
		}
	case isWord(c) && !isWord(t.last()):
		t.word()
		return
	}
	t.write(t.s[t.i : t.i+1])
	t.i++
}

// word writes the word that starts at t.i: a timestamp, UUID or ARN that
// starts there, else the word (a run of letters, digits and _) as its
// class says.
func (t *templater) word() {
	rest := t.s[t.i:]
	if n := timestampLen(rest); n > 0 {
		t.emit("<time>", t.i+n)
		return
	}
	if n := uuidLen(rest); n > 0 {
		t.emit("<id>", t.i+n)
		return
	}
	if n := arnLen(rest); n > 0 {
		t.emit("<arn>", t.i+n)
		return
	}
	w := rest[:wordLen(rest)]
	switch {
	case isHex(w):
		t.emit("<hex>", t.i+len(w))
	case isID(w):
		t.emit("<id>", t.i+len(w))
	case isDigit(w[0]):
		t.emit("<n>", t.i+numberLen(rest)) // what follows starts a word of its own
	default:
		t.write(w)
		t.i += len(w)
	}
}

// emit writes a placeholder for the message up to end.
func (t *templater) emit(placeholder string, end int) {
	t.write(placeholder)
	t.i = end
}

func (t *templater) write(s string) {
	if t.space && t.out.Len() > t.base {
		t.out.WriteByte(' ')
	}
	t.space = false
	t.out.WriteString(s)
}

// last is the byte the template ends with, a space when whitespace is
// pending, 0 at the start.
func (t *templater) last() byte {
	switch {
	case t.out.Len() == t.base:
		return 0
	case t.space:
		return ' '
	}
	return t.out.String()[t.out.Len()-1]
}

// closer returns where the quote c opened at t.i closes: the next c that
// no word character follows; 0 when none does.
func (t *templater) closer(c byte) int {
	q := quoteIndex(c)
	if t.noClose[q] > 0 && t.i >= t.noClose[q]-1 {
		return 0
	}
	for j := t.i + 1; j < len(t.s); {
		k := strings.IndexByte(t.s[j:], c)
		if k < 0 {
			break
		}
		j += k
		if j+1 == len(t.s) || !wordish(t.s[j+1]) {
			return j
		}
		j++
	}
	t.noClose[q] = t.i + 1 // no later opener of c closes either
	return 0
}

// result cuts the template to the budget, never inside a word (a cut word
// could read as another class), and trims it.
func (t *templater) result() string {
	all := t.out.String()
	out := all[t.base:]
	if len(out) > t.budget {
		cut := t.budget
		for cut > 0 && (!utf8.RuneStart(out[cut]) || isWord(out[cut-1]) && isWord(out[cut])) {
			cut--
		}
		out = out[:cut]
	}
	return all[:t.base+len(strings.TrimRight(out, " "))]
}
