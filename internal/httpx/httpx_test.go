package httpx_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// Error answers with the status of the code and a JSON body; it logs what
// the caller does not see (internal errors) and what an operator should
// (refusals while a dependency is away), and nothing else.
func TestError(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		body, logs string
	}{
		{"Invalid", substate.Errorf(substate.EINVALID, "body is not valid JSON"), 400,
			`{"error":{"code":"invalid","message":"body is not valid JSON"}}`, ""},
		{"Unavailable", substate.WrapError(substate.EUNAVAILABLE, errors.New("nats: no servers"), "nats is unavailable, retry later"), 503,
			`"message":"nats is unavailable, retry later"`, `level=WARN msg="http request refused, the caller may retry" method=POST path=/v1/ingest/eventbridge err="nats is unavailable, retry later: nats: no servers"`},
		{"Internal", errors.New("disk on fire"), 500,
			`{"error":{"code":"internal","message":"internal error"}}`, `level=ERROR msg="http request failed" method=POST path=/v1/ingest/eventbridge err="disk on fire"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/v1/ingest/eventbridge", nil)
			httpx.Error(w, r, tc.err, slog.New(slog.NewTextHandler(&logs, nil)))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("got %d %s, want %d with %s", w.Code, w.Body, tc.status, tc.body)
			}
			if got := logs.String(); tc.logs == "" && got != "" || !strings.Contains(got, tc.logs) {
				t.Errorf("logged %q, want %q", got, tc.logs)
			}
			if got := w.Header().Get("Retry-After"); (tc.status == 503) != (got == "1") {
				t.Errorf("Retry-After %q", got)
			}
		})
	}
}
