// Package httpx holds the small HTTP conventions every substate handler
// shares: the error body, the table from error codes to statuses, and JSON
// responses.
package httpx

import (
	"encoding/json"
	"log/slog"
	"net/http"

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

// JSON writes v as a JSON response with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
