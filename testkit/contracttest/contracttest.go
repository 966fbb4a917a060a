// Package contracttest checks HTTP responses against the OpenAPI document
// substate ships (contract/openapi.json): a test package's TestMain calls
// Main, and every response its tests fetch through http.DefaultTransport
// from a substate route must validate, status included.
package contracttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/internal/jsonx"
)

// Prefixes are the paths substate serves JSON or metrics on (the console's
// page and its assets are the rest); a request elsewhere (a test's own
// route, a provider's API) is not checked.
var Prefixes = []string{"/v1/", "/healthz", "/readyz", "/metrics", "/console/api/"}

// OpenAPIPath returns the path of openapi.json that documents a route of
// the server's table (httpapi.Route.Path): the same path, except that the
// root "/{$}" is "/" and a subtree "/x/" is "/x/{file}".
func OpenAPIPath(route string) string {
	switch {
	case route == "/{$}":
		return "/"
	case strings.HasSuffix(route, "/") && route != "/":
		return route + "{file}"
	}
	return route
}

// Validator checks responses against the OpenAPI document.
type Validator struct {
	Doc *openapi3.T
	// Stubbed are paths whose responses are not checked.
	Stubbed []string

	router routers.Router
	errSch *openapi3.Schema

	mu        sync.Mutex
	failures  []string
	validated int
}

// A Server-Sent Events stream is checked as text: its status, its
// content type, and that it is a string.
func init() { openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder) }

// Load parses and validates the document and builds its router.
func Load() (*Validator, error) {
	b, err := contract.Document(contract.OpenAPIFile)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	routed := *doc
	routed.Servers = nil // match any host: tests listen on random ports
	r, err := legacy.NewRouter(&routed)
	if err != nil {
		return nil, err
	}
	return &Validator{Doc: doc, router: r, errSch: doc.Components.Schemas["Error"].Value}, nil
}

// Substate reports whether a path is one substate serves.
func Substate(path string) bool {
	for _, p := range Prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Check validates one response to req: a documented route's response
// against its operation (status, headers, body); an error response of an
// undocumented path against the Error schema. It returns nil for a request
// outside Prefixes.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if !Substate(req.URL.Path) {
		return nil
	}
	if req.URL.RawPath != "" {
		// An escaped slash (a tenant id "a/b") is one path segment, as
		// the server's mux sees it; the router splits the decoded path.
		req = req.Clone(req.Context())
		req.URL.Path, req.URL.RawPath = req.URL.EscapedPath(), ""
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		if status < 400 {
			return fmt.Errorf("%s %s answered %d but is not in openapi.json", req.Method, req.URL.Path, status)
		}
		return v.checkError(body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// isEventStream reports whether resp is a stream of Server-Sent Events.
func isEventStream(resp *http.Response) bool {
	return resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// checkStream checks that req's operation documents an event stream
// answer with status.
func (v *Validator) checkStream(req *http.Request, status int) error {
	route, _, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s answered an event stream but is not in openapi.json", req.Method, req.URL.Path)
	}
	r := route.Operation.Responses.Status(status)
	if r == nil || r.Value == nil || r.Value.Content.Get("text/event-stream") == nil {
		return fmt.Errorf("%s %s answered %d text/event-stream, which openapi.json does not document", req.Method, req.URL.Path, status)
	}
	return nil
}

func (v *Validator) checkError(body []byte) error {
	val, err := jsonx.Decode(body)
	if err != nil {
		return fmt.Errorf("error response is not JSON: %w", err)
	}
	return v.errSch.VisitJSON(val)
}

// Transport returns a RoundTripper that checks every response of base.
func (v *Validator) Transport(base http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err != nil || !Substate(req.URL.Path) || req.Method == http.MethodHead || slices.Contains(v.Stubbed, req.URL.Path) {
			return resp, err
		}
		if isEventStream(resp) {
			// A stream lasts as long as its reader reads: its status and
			// content type are checked, its body is passed on unread.
			v.record(req, resp.StatusCode, v.checkStream(req, resp.StatusCode))
			return resp, nil
		}
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return resp, nil // the test sees the short body itself
		}
		v.record(req, resp.StatusCode, v.Check(req, resp.StatusCode, resp.Header, body))
		return resp, nil
	})
}

func (v *Validator) record(req *http.Request, status int, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.validated++
	if err != nil {
		v.failures = append(v.failures, fmt.Sprintf("%s %s → %d: %v", req.Method, req.URL.RequestURI(), status, err))
	}
}

// Result returns how many responses were checked and the failures.
func (v *Validator) Result() (int, []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.validated, append([]string(nil), v.failures...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Main runs a test package with http.DefaultTransport checking every
// response against the OpenAPI document, and fails it when one did not
// validate or none was checked. Responses of the paths stubbed are not
// checked: the package's tests serve them with a stand-in handler (a fake
// metrics handler, say).
func Main(m *testing.M, stubbed ...string) {
	v, err := Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "contracttest:", err)
		os.Exit(1)
	}
	v.Stubbed = stubbed
	http.DefaultTransport = v.Transport(http.DefaultTransport)
	code := m.Run()
	n, failures := v.Result()
	for _, f := range failures {
		fmt.Fprintln(os.Stderr, "response does not match contract/openapi.json:", f)
	}
	if len(failures) > 0 && code == 0 {
		code = 1
	}
	if n == 0 && code == 0 && !testing.Short() && runsAll() {
		fmt.Fprintln(os.Stderr, "contracttest: no response was checked against contract/openapi.json")
		code = 1
	}
	os.Exit(code)
}

// runsAll reports whether the tests run without a -run filter, when the
// package's tests must have checked some response.
func runsAll() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.run") {
			return false
		}
	}
	return true
}
