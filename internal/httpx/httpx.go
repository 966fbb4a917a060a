// Package httpx holds the small HTTP conventions every substate handler
// shares: the error body, the table from error codes to statuses, and JSON
// responses.
package httpx

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/substatehq/substate"
)

// statuses maps each error code to its one HTTP status.
var statuses = map[string]int{
	substate.EINVALID:      http.StatusBadRequest,
	substate.ENOTENANT:     http.StatusBadRequest,
	substate.EUNAUTHORIZED: http.StatusUnauthorized,
	substate.EFORBIDDEN:    http.StatusForbidden,
	substate.EMETHOD:       http.StatusMethodNotAllowed,
	substate.EMEDIATYPE:    http.StatusUnsupportedMediaType,
	substate.ETIMEOUT:      http.StatusRequestTimeout,
	substate.ENOTFOUND:     http.StatusNotFound,
	substate.ECONFLICT:     http.StatusConflict,
	substate.EEXISTS:       http.StatusConflict,
	substate.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	substate.ETHROTTLED:    http.StatusTooManyRequests,
	substate.EUNAVAILABLE:  http.StatusServiceUnavailable,
	substate.EINTERNAL:     http.StatusInternalServerError,
}

// Status returns the HTTP status of an error code.
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON body of every error response:
// {"error":{"code":…,"message":…}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the code and caller-safe message of an error response.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error writes err as a JSON error with the status of its code. Internal
// errors are logged, since their message is not shown to the caller, and
// so are requests refused as unavailable (503), which the caller retries
// but an operator should see.
func Error(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	code := substate.ErrorCode(err)
	switch {
	case log == nil:
	case code == substate.EINTERNAL:
		log.Error("http request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case code == substate.EUNAVAILABLE:
		log.Warn("http request refused, the caller may retry", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if code == substate.EUNAVAILABLE {
		w.Header().Set("Retry-After", "1")
	}
	JSON(w, Status(code), ErrorBody{ErrorDetail{Code: code, Message: substate.ErrorMessage(err)}})
}

// BodyError returns the error of a failed read of a request body, for
// the answer: ETOOLARGE past an http.MaxBytesReader's limit, ETIMEOUT
// (408) when the read deadline passed because the client sent too slowly,
// EINVALID (400) otherwise. Either way the rest of the body is not read,
// so the answer closes the connection.
func BodyError(w http.ResponseWriter, err error) error {
	DropBody(w)
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge):
		return substate.Errorf(substate.ETOOLARGE, "the body is larger than %d bytes", tooLarge.Limit)
	case errors.As(err, &ne) && ne.Timeout():
		return substate.WrapError(substate.ETIMEOUT, err, "the body did not arrive in time: send it at once, or faster")
	}
	return substate.WrapError(substate.EINVALID, err, "read body")
}

// DropBody makes the answer to a request the last on its connection,
// without reading what is left of the request's body: "Connection:
// close", and a read deadline of now. Go's server otherwise reads up to
// 256 KiB of an unread body after the handler, to reuse the connection,
// and a client that sends it slowly holds the connection all that time.
func DropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// JSON writes v as a JSON response with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
