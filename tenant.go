package substate

import (
	"unicode"
	"unicode/utf8"
)

// MaxTenantIDBytes is the longest tenant id substate accepts, in bytes.
// Tenant ids in control planes are slugs, UUIDs and keys, tens of bytes
// long; 256 leaves room for any of them and bounds what an id costs in a
// subject, a view key and a log line.
const MaxTenantIDBytes = 256

// ValidateTenantID reports why id cannot be a tenant id, as an error naming
// the rule it breaks: ENOTENANT when it is empty, EINVALID when it is
// longer than MaxTenantIDBytes, is not valid UTF-8, or holds a control
// character (Unicode category Cc: C0, DEL, C1) or an invisible format
// character (category Cf: the bidirectional controls such as U+202E, which
// make an id read as another in a table or a log, zero-width characters,
// the byte order mark). Nil means it is valid.
func ValidateTenantID(id string) error {
	switch {
	case id == "":
		return Errorf(ENOTENANT, "tenant id is empty")
	case len(id) > MaxTenantIDBytes:
		return Errorf(EINVALID, "tenant id is %d bytes, longer than the maximum of %d: %s",
			len(id), MaxTenantIDBytes, QuotePrefix(id, QuoteLimit))
	}
	for i, r := range id {
		switch {
		case r == utf8.RuneError && !validRuneAt(id, i):
			return Errorf(EINVALID, "tenant id is not valid UTF-8 (byte 0x%02X at offset %d): %s",
				id[i], i, QuotePrefix(id, QuoteLimit))
		case unicode.IsControl(r):
			return Errorf(EINVALID, "tenant id has the control character %U at offset %d: %s",
				r, i, QuotePrefix(id, QuoteLimit))
		case unicode.Is(unicode.Cf, r):
			return Errorf(EINVALID, "tenant id has the invisible format character %U at offset %d: %s",
				r, i, QuotePrefix(id, QuoteLimit))
		}
	}
	return nil
}

// validRuneAt reports whether the bytes at i encode a rune (a literal
// U+FFFD is valid; a byte that starts no rune is not).
func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}

// UnresolvedTenant is the error of a raw event about one execution whose
// tenant no tenant rule finds (its code, from Err, is ENOTENANT). It names
// the execution, so that the normalizer can dead-letter the first such
// event of an execution and keep the later ones in the raw stream only.
type UnresolvedTenant struct {
	Provider    Provider
	ExecutionID string
	Err         error // an *Error with code ENOTENANT listing the rules tried
}

// Error returns the message of Err.
func (e *UnresolvedTenant) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *UnresolvedTenant) Unwrap() error { return e.Err }
