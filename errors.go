package substate

import (
	"errors"
	"fmt"
)

// Error codes shared by every adapter. The HTTP layer maps each to one status.
const (
	EINVALID      = "invalid"        // malformed or semantically wrong input
	ENOTFOUND     = "not_found"      // the thing asked for does not exist
	ECONFLICT     = "conflict"       // exists with different content
	EEXISTS       = "already_exists" // exists already (idempotent callers may accept it)
	EUNAUTHORIZED = "unauthorized"   // missing or bad credentials
	ETOOLARGE     = "too_large"      // request body above the limit
	EUNAVAILABLE  = "unavailable"    // a dependency (NATS, a provider) is away; retry later
	ETHROTTLED    = "throttled"      // a provider asked us to slow down
	ENOTENANT     = "tenant_unresolved"
	EINTERNAL     = "internal"
)

// Error codes of the HTTP API's access and request checks.
const (
	EFORBIDDEN = "forbidden"              // good credentials without the right to this
	EMETHOD    = "method_not_allowed"     // the route exists for other methods
	EMEDIATYPE = "unsupported_media_type" // a body in a content type the route does not take
	ETIMEOUT   = "timeout"                // a request body that did not arrive in time
)

// Error is an application error with a machine-readable code and a message
// safe to show to the caller.
type Error struct {
	Code    string
	Message string
	Err     error // optional cause, not shown to callers
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with code and message that keeps err as its cause.
func WrapError(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of err: the *Error message, or
// "internal error" for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
