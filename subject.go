package substate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Stream names.
const (
	StreamRaw    = "SUBSTATE_RAW"
	StreamEvents = "SUBSTATE_EVENTS"
	StreamDLQ    = "SUBSTATE_DLQ"
	StreamAudit  = "SUBSTATE_AUDIT"
	// StreamActions holds fleet jobs: each job's request, frozen set,
	// intents, controls and state (substate.actions.<job>.…).
	StreamActions = "SUBSTATE_ACTIONS"
	// StreamLeases holds the per-execution leases of fleet jobs
	// (substate.leases.<execution>), each kept for the lease time.
	StreamLeases = "SUBSTATE_LEASES"
	// StreamUnresolved remembers the executions without tenant already
	// dead-lettered (see UnresolvedMemory).
	StreamUnresolved = "SUBSTATE_UNRESOLVED"
)

// Subject prefixes.
const (
	SubjectRawPrefix        = "substate.raw."
	SubjectEventsPrefix     = "substate.events."
	SubjectChangesPrefix    = "substate.changes."
	SubjectDLQPrefix        = "substate.dlq."
	SubjectTasksPrefix      = "substate.tasks."
	SubjectAuditPrefix      = "substate.audit."
	SubjectActionsPrefix    = "substate.actions."
	SubjectLeasesPrefix     = "substate.leases."
	SubjectUnresolvedPrefix = "substate.unresolved."
)

// JobSubject returns the subject of one part of a fleet job's record:
// substate.actions.<job>.<part> (job, members.<n>, intent, control,
// state).
func JobSubject(job, part string) string {
	return SubjectActionsPrefix + EncodeToken(job) + "." + part
}

// LeaseSubject returns the subject of the lease on one execution of a
// provider, or one dead letter: substate.leases.<provider>.<id token>.
func LeaseSubject(lane, id string) string {
	return SubjectLeasesPrefix + EncodeToken(lane) + "." + EncodeToken(id)
}

// RawSubject returns the subject raw events of kind are published on.
func RawSubject(kind RawKind) string { return SubjectRawPrefix + string(kind) }

// AuditSubject returns the subject an audit event of action on tenant is
// published on: substate.audit.<action>.<tenant token>.
func AuditSubject(action ExecutionAction, tenant string) string {
	return SubjectAuditPrefix + EncodeToken(string(action)) + "." + EncodeToken(tenant)
}

// AuditJobSubject is the filter of the audit events of one fleet job:
// substate.audit.*.*.<job token>.
func AuditJobSubject(job string) string {
	return SubjectAuditPrefix + "*.*." + EncodeToken(job)
}

// AuditTenantSubjects are the filters of one tenant's audit events: its
// single actions and its fleet jobs' actions.
func AuditTenantSubjects(tenant string) []string {
	t := EncodeToken(tenant)
	return []string{SubjectAuditPrefix + "*." + t, SubjectAuditPrefix + "*." + t + ".*"}
}

// UnresolvedSubject returns the subject on which SUBSTATE_UNRESOLVED
// remembers an execution without tenant: substate.unresolved.<provider>.
// <the hex SHA-256 of its id, cut to 32 digits>, whatever the id's length.
func UnresolvedSubject(p Provider, executionID string) string {
	sum := sha256.Sum256([]byte(executionID))
	return SubjectUnresolvedPrefix + EncodeToken(string(p)) + "." + hex.EncodeToString(sum[:16])
}

// EventsSubject returns the canonical events subject of a tenant.
func EventsSubject(tenant string) string { return SubjectEventsPrefix + EncodeToken(tenant) }

// DLQSubject returns the dead-letter subject of a pipeline stage.
func DLQSubject(stage string) string { return SubjectDLQPrefix + EncodeToken(stage) }

// TaskSubject returns the request subject of an engine task resource
// "service.operation".
func TaskSubject(service, operation string) string {
	return SubjectTasksPrefix + EncodeToken(service) + "." + EncodeToken(operation)
}

const hexDigits = "0123456789ABCDEF"

// MaxTokenBytes is the longest subject token EncodeToken returns: the
// reversible encoding of a MaxTenantIDBytes id made only of escaped bytes.
// NATS closes the connection of a client whose protocol line passes 4 KB,
// so no subject may grow with its input.
const MaxTokenBytes = 3 * MaxTenantIDBytes

// Digested tokens: the encoded first digestPrefix bytes of the string,
// digestMark, and digestHex lowercase hex digits of its SHA-256.
const (
	digestPrefix = 64
	digestMark   = "~~"
	digestHex    = 32
)

// EncodeToken encodes s into one NATS subject token of at most
// MaxTokenBytes bytes. Letters, digits, '-' and '_' stand for themselves;
// every other byte (dots, spaces, '*', '>', '~', non-ASCII) becomes '~' and
// two upper-case hex digits. The empty string becomes "~". This encoding
// is reversible (DecodeToken) whenever it fits MaxTokenBytes, which every
// valid tenant id does (ValidateTenantID). A longer one is replaced by a
// digest token: the encoded first 64 bytes of s (cut at a rune boundary),
// "~~" (which the reversible encoding never writes) and 32 hex digits of
// the SHA-256 of s, so distinct strings still get distinct tokens.
func EncodeToken(s string) string {
	if s == "" {
		return "~"
	}
	if plainToken(s) && len(s) <= MaxTokenBytes {
		return s
	}
	if encodedLen(s) > MaxTokenBytes {
		return digestToken(s)
	}
	var b strings.Builder
	b.Grow(encodedLen(s))
	appendEncoded(&b, s)
	return b.String()
}

// encodedLen returns the length of the reversible encoding of s.
func encodedLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if plainByte(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

func appendEncoded(b *strings.Builder, s string) {
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
}

// digestToken returns the bounded token of a string whose reversible
// encoding is too long.
func digestToken(s string) string {
	sum := sha256.Sum256([]byte(s))
	var b strings.Builder
	b.Grow(3*digestPrefix + len(digestMark) + digestHex)
	appendEncoded(&b, Truncate(s, digestPrefix))
	b.WriteString(digestMark)
	b.WriteString(hex.EncodeToString(sum[:digestHex/2]))
	return b.String()
}

// DecodeToken reverses EncodeToken; a malformed token, or a digest token
// (which stands for a string too long to encode reversibly), is an
// EINVALID error.
func DecodeToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	if plainToken(tok) && len(tok) <= MaxTokenBytes {
		return tok, nil
	}
	if strings.Contains(tok, digestMark) {
		return "", Errorf(EINVALID, "subject token %s is the digest of a longer string and cannot be decoded", QuotePrefix(tok, QuoteLimit))
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		if c != '~' || i+2 >= len(tok) {
			return "", Errorf(EINVALID, "malformed subject token %s", QuotePrefix(tok, QuoteLimit))
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", Errorf(EINVALID, "malformed subject token %s", QuotePrefix(tok, QuoteLimit))
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	if out := b.String(); EncodeToken(out) == tok {
		return out, nil
	}
	return "", Errorf(EINVALID, "non-canonical subject token %s", QuotePrefix(tok, QuoteLimit))
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
