package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// openIngest serves ingest routes beside the built-in ones: EventBridge's
// accepts, Restate's answers a plain-text error.
func openIngest(tb testing.TB) string {
	tb.Helper()
	in := ingesters{
		substate.ProviderStepFunctions: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"accepted":1,"duplicates":0,"events":[{"id":"e-1","result":"accepted"}]}`))
		}),
		substate.ProviderRestate: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "nope", http.StatusConflict)
		}),
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Ingest: in}
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s.URL()
}

// ingesters serve each provider's ingest route with its handler.
type ingesters map[substate.Provider]http.Handler

func (in ingesters) Endpoint(p substate.Provider) http.Handler { return in[p] }

type answer struct {
	status int
	code   string
	header http.Header
}

func do(tb testing.TB, method, url, contentType, body string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct{ Error struct{ Code string } }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		tb.Fatalf("%s %s: %d, body is not JSON: %v", method, url, resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	return answer{resp.StatusCode, b.Error.Code, resp.Header}
}

// Every error is the JSON error, the router's own 404 and 405 included,
// and ingest takes JSON only.
func TestErrorsAreJSON(t *testing.T) {
	url := openIngest(t)
	for _, tc := range []struct {
		name, method, path, contentType string
		status                          int
		code                            string
	}{
		{"UnknownPath", "GET", "/nowhere", "", 404, substate.ENOTFOUND},
		{"UnknownIngestPath", "POST", "/v1/ingest/nowhere", "application/json", 404, substate.ENOTFOUND},
		{"MethodOfHealth", "POST", "/healthz", "", 405, substate.EMETHOD},
		{"MethodOfIngest", "GET", "/v1/ingest/eventbridge", "", 405, substate.EMETHOD},
		{"PlainTextErrorOfAHandler", "POST", "/v1/ingest/restate", "application/json", 409, substate.ECONFLICT},
		{"FormBody", "POST", "/v1/ingest/eventbridge", "application/x-www-form-urlencoded", 415, substate.EMEDIATYPE},
		{"TextBody", "POST", "/v1/ingest/eventbridge", "text/plain", 415, substate.EMEDIATYPE},
		{"BadContentType", "POST", "/v1/ingest/eventbridge", "application/", 415, substate.EMEDIATYPE},
		{"JSON", "POST", "/v1/ingest/eventbridge", "application/json", 202, ""},
		{"JSONWithCharset", "POST", "/v1/ingest/eventbridge", "application/json; charset=utf-8", 202, ""},
		{"CloudEventsJSON", "POST", "/v1/ingest/eventbridge", "application/cloudevents+json", 202, ""},
		{"NoContentType", "POST", "/v1/ingest/eventbridge", "", 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, url+tc.path, tc.contentType, `{"id":"x"}`)
			if a.status != tc.status || a.code != tc.code {
				t.Fatalf("%d %q, want %d %q", a.status, a.code, tc.status, tc.code)
			}
			if tc.status == 405 && a.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
}
