package substate

import (
	"strings"
)

// Stream names.
const (
	StreamRaw    = "SUBSTATE_RAW"
	StreamEvents = "SUBSTATE_EVENTS"
	StreamDLQ    = "SUBSTATE_DLQ"
)

// Subject prefixes.
const (
	SubjectRawPrefix     = "substate.raw."
	SubjectEventsPrefix  = "substate.events."
	SubjectChangesPrefix = "substate.changes."
	SubjectDLQPrefix     = "substate.dlq."
	SubjectTasksPrefix   = "substate.tasks."
)

// Header names used on substate's messages.
const (
	HeaderMsgID          = "Nats-Msg-Id"
	HeaderContentType    = "Content-Type"
	HeaderReceivedAt     = "Substate-Received-At"
	HeaderDLQReason      = "Substate-Dlq-Reason"
	HeaderDLQStage       = "Substate-Dlq-Stage"
	HeaderDLQSubject     = "Substate-Dlq-Subject"
	HeaderDLQSeq         = "Substate-Dlq-Stream-Seq"
	HeaderIdempotencyKey = "Substate-Idempotency-Key"
)

// RawSubject returns the subject raw events of kind are published on.
func RawSubject(kind RawKind) string { return SubjectRawPrefix + string(kind) }

// EventsSubject returns the canonical events subject of a tenant.
func EventsSubject(tenant string) string { return SubjectEventsPrefix + EncodeToken(tenant) }

// ChangesSubject returns the change-feed subject of a tenant.
func ChangesSubject(tenant string) string { return SubjectChangesPrefix + EncodeToken(tenant) }

// DLQSubject returns the dead-letter subject of a pipeline stage.
func DLQSubject(stage string) string { return SubjectDLQPrefix + EncodeToken(stage) }

// TaskSubject returns the request subject of an engine task resource
// "service.operation".
func TaskSubject(service, operation string) string {
	return SubjectTasksPrefix + EncodeToken(service) + "." + EncodeToken(operation)
}

const hexDigits = "0123456789ABCDEF"

// EncodeToken encodes s reversibly into one NATS subject token. Letters,
// digits, '-' and '_' stand for themselves; every other byte (dots, spaces,
// '*', '>', '~', non-ASCII) becomes '~' and two upper-case hex digits. The
// empty string becomes "~".
func EncodeToken(s string) string {
	if s == "" {
		return "~"
	}
	if plainToken(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 3)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// DecodeToken reverses EncodeToken; a malformed token is an EINVALID error.
func DecodeToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	if plainToken(tok) {
		return tok, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		if c != '~' || i+2 >= len(tok) {
			return "", Errorf(EINVALID, "malformed subject token %q", tok)
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", Errorf(EINVALID, "malformed subject token %q", tok)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	if out := b.String(); EncodeToken(out) == tok {
		return out, nil
	}
	return "", Errorf(EINVALID, "non-canonical subject token %q", tok)
}

func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
