package contract_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/testkit/contracttest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// The credentials of the matrix's worker.
const (
	matrixIngestKey = "ingest-key-matrix"
	matrixWebhook   = "whsec_c2VjcmV0LW9mLXRoZS1tYXRyaXgtd2ViaG9vaw=="
	matrixTenant    = "acme" // the tenant a route's {id} names: the example of openapi.json
)

// keyKind is what a presented credential is, as a security scheme of
// openapi.json takes it.
type keyKind string

const (
	kindNone    keyKind = ""
	kindIngest  keyKind = "ingest key"
	kindWebhook keyKind = "webhook signature"
	kindRead    keyKind = "read-API key"
	kindUnknown keyKind = "unknown key"
)

// schemeKinds says what kind of credential each security scheme of
// openapi.json takes. A scheme the table does not know fails the test:
// say here what it takes.
var schemeKinds = map[string]keyKind{
	"ingestKey":        kindIngest,
	"webhookSignature": kindWebhook,
	"bearer":           kindRead,
	"apiKey":           kindRead,
	"consoleCookie":    kindRead,
}

// credential is one kind of caller of the matrix: what it sends, and how.
type credential struct {
	name   string
	kind   keyKind
	key    string        // the key sent; none for kindNone and kindWebhook
	via    string        // "bearer", or the header or cookie the key is in
	scope  httpapi.Scope // a read-API key's
	prefix string        // a read-API key's tenant prefix
}

// credentials are the callers the matrix walks every route with.
var credentials = []credential{
	{name: "none"},
	{name: "ingest key", kind: kindIngest, key: matrixIngestKey, via: substate.HeaderAPIKey},
	{name: "ingest key as bearer", kind: kindUnknown, key: matrixIngestKey, via: "bearer"},
	{name: "webhook signature", kind: kindWebhook, via: substate.HeaderWebhookSignature},
	{name: "read key", kind: kindRead, key: "key-read", via: "bearer", scope: httpapi.ScopeRead},
	{name: "read key as X-Api-Key", kind: kindRead, key: "key-read", via: substate.HeaderAPIKey, scope: httpapi.ScopeRead},
	{name: "read key in the console cookie", kind: kindRead, key: "key-read", via: httpapi.KeyCookie, scope: httpapi.ScopeRead},
	{name: "read:raw key", kind: kindRead, key: "key-raw", via: "bearer", scope: httpapi.ScopeReadRaw},
	{name: "tenant-prefix key", kind: kindRead, key: "key-acme", via: "bearer", scope: httpapi.ScopeRead, prefix: matrixTenant},
	{name: "other tenant-prefix key", kind: kindRead, key: "key-globex", via: "bearer", scope: httpapi.ScopeRead, prefix: "globex"},
	{name: "admin key", kind: kindRead, key: "key-admin", via: "bearer", scope: httpapi.ScopeAdmin},
	{name: "admin key as X-Api-Key", kind: kindRead, key: "key-admin", via: substate.HeaderAPIKey, scope: httpapi.ScopeAdmin},
	{name: "wrong key", kind: kindUnknown, key: "key-nobody-has", via: "bearer"},
	{name: "wrong key as X-Api-Key", kind: kindUnknown, key: "key-nobody-has", via: substate.HeaderAPIKey},
}

// TestSecurityMatrix walks every route of a real worker's route table,
// with every credential configured, with every kind of credential, and
// checks that the worker lets in exactly whom openapi.json's security of
// that operation names: 401 where no requirement's scheme is presented
// with a credential of its kind, 403 where one is but with too narrow a
// scope (or a tenant outside the key's prefix), and neither where a
// requirement is met. A route the worker serves that the document lacks,
// and an operation without security, fail it too.
func TestSecurityMatrix(t *testing.T) {
	v, err := contracttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	w := workertest.Start(t, func(f *worker.Flags) {
		f.IngestAPIKey, f.RestateWebhookSecret = matrixIngestKey, matrixWebhook
		f.APIKeys = strings.Join([]string{
			keyLine("reader", "read", "*", "key-read"), keyLine("raw", "read:raw", "*", "key-raw"),
			keyLine("acme", "read", matrixTenant, "key-acme"), keyLine("globex", "read", "globex", "key-globex"),
			keyLine("ops", "admin", "*", "key-admin"),
		}, ";")
	})
	for _, rt := range w.HTTP.Routes() {
		path := contracttest.OpenAPIPath(rt.Path)
		t.Run(rt.Pattern(), func(t *testing.T) {
			if rt.Handler == nil {
				t.Fatalf("%s is not served by a worker with every credential configured: serve it in this test", rt.Pattern())
			}
			op := operation(v.Doc, rt.Method, path)
			if op == nil {
				t.Fatalf("%s is served but openapi.json has no operation %s %s", rt.Pattern(), rt.Method, path)
			}
			if op.Security == nil {
				t.Fatalf("%s %s: openapi.json gives no security; a public route says \"security\": []", rt.Method, path)
			}
			for _, c := range credentials {
				want, why := expected(t, v.Doc, op, path, c)
				got := send(t, w.HTTP.URL(), rt, requestFor(t, op, path), c)
				if class(got) != want {
					t.Errorf("%s %s with %s: %d, but openapi.json says %s (%s)", rt.Method, path, c.name, got, want, why)
				}
			}
		})
	}
}

func keyLine(name, scopes, prefix, key string) string {
	return fmt.Sprintf("%s %s %s sha256:%s", name, scopes, prefix, workertest.KeyHash(key))
}

// operation returns the operation of openapi.json at method and path.
func operation(doc *openapi3.T, method, path string) *openapi3.Operation {
	item := doc.Paths.Value(path)
	if item == nil {
		return nil
	}
	return item.GetOperation(method)
}

// Classes of answers the matrix tells apart.
const (
	classIn           = "let in"
	classUnauthorized = "401"
	classForbidden    = "403"
)

func class(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return classUnauthorized
	case http.StatusForbidden:
		return classForbidden
	}
	return classIn
}

// expected returns the class of answer op's security says c gets, and
// why.
func expected(t *testing.T, doc *openapi3.T, op *openapi3.Operation, path string, c credential) (string, string) {
	t.Helper()
	if len(*op.Security) == 0 {
		return classIn, "the operation is public"
	}
	narrow := ""
	for _, req := range *op.Security {
		if len(req) == 0 {
			t.Fatalf("%s: an empty security requirement ({}) lets anyone in; the loopback default is said in info.description", path)
		}
		for name, roles := range req {
			kind, ok := schemeKinds[name]
			if !ok {
				t.Fatalf("security scheme %q: say in schemeKinds what kind of credential it takes", name)
			}
			if kind == kindRead && len(roles) != 1 {
				t.Fatalf("%s: requirement %s must name the one scope it needs (read, read:raw or admin), has %v", path, name, roles)
			}
			if !presents(doc, name, c) || c.kind != kind {
				continue
			}
			if kind == kindRead && !c.scope.Includes(httpapi.Scope(roles[0])) {
				narrow = fmt.Sprintf("%s has scope %s, %s needs %s", c.name, c.scope, name, roles[0])
				continue
			}
			if tenantScoped(path) && !strings.HasPrefix(matrixTenant, c.prefix) {
				return classForbidden, fmt.Sprintf("tenant %s is outside the key's prefix %s", matrixTenant, c.prefix)
			}
			return classIn, fmt.Sprintf("requirement %s %v is met", name, roles)
		}
	}
	if narrow != "" {
		return classForbidden, narrow
	}
	return classUnauthorized, "no requirement's scheme is presented with a credential of its kind"
}

// presents reports whether c is sent the way security scheme name says.
func presents(doc *openapi3.T, name string, c credential) bool {
	s := doc.Components.SecuritySchemes[name].Value
	switch {
	case s.Type == "http" && s.Scheme == "bearer":
		return c.via == "bearer"
	case s.Type == "apiKey":
		return c.via == s.Name && c.kind != kindNone
	}
	return false
}

// tenantScoped reports whether a path reads or acts on one tenant, the
// {id} of /v1/tenants/{id}: a key's tenant prefix must include it.
func tenantScoped(path string) bool { return strings.HasPrefix(path, "/v1/tenants/{id}") }

// matrixRequest is one request of the matrix, before its credential.
type matrixRequest struct {
	target string // path and query
	body   []byte // of a POST
}

// requestFor returns a request to the operation: path parameters and
// required query parameters from their examples (or their first enum
// value), and an empty JSON object as the body of a POST: what it does
// with a caller it lets in does not matter here.
func requestFor(t *testing.T, op *openapi3.Operation, path string) matrixRequest {
	t.Helper()
	q := url.Values{}
	for _, ref := range op.Parameters {
		p := ref.Value
		val := exampleOf(p)
		switch {
		case p.In == "path" && val == "":
			t.Fatalf("%s: path parameter %s has no example", path, p.Name)
		case p.In == "path":
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(val))
		case p.In == "query" && p.Required:
			q.Set(p.Name, val)
		}
	}
	r := matrixRequest{target: path}
	if len(q) > 0 {
		r.target += "?" + q.Encode()
	}
	r.body = []byte("{}")
	return r
}

// exampleOf returns a parameter's example, its schema's, or its schema's
// first enum value; "" without any.
func exampleOf(p *openapi3.Parameter) string {
	switch {
	case p.Example != nil:
		return fmt.Sprint(p.Example)
	case p.Schema != nil && p.Schema.Value.Example != nil:
		return fmt.Sprint(p.Schema.Value.Example)
	case p.Schema != nil && len(p.Schema.Value.Enum) > 0:
		return fmt.Sprint(p.Schema.Value.Enum[0])
	}
	return ""
}

// send sends r to the route with credential c and returns the status. A
// streaming answer is closed once its headers are in.
func send(t *testing.T, base string, rt httpapi.Route, r matrixRequest, c credential) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if rt.Method == http.MethodPost {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, rt.Method, base+r.target, body)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case c.kind == kindWebhook:
		sign(t, req, r.body)
	case c.via == "bearer":
		req.Header.Set("Authorization", "Bearer "+c.key)
	case c.via == httpapi.KeyCookie:
		req.AddCookie(&http.Cookie{Name: httpapi.KeyCookie, Value: c.key})
	case c.via != "":
		req.Header.Set(c.via, c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s with %s: %v", rt.Method, r.target, c.name, err)
	}
	if !rt.Stream {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sign signs a delivery as a Restate handler does with the worker's
// webhook secret.
func sign(t *testing.T, req *http.Request, body []byte) {
	t.Helper()
	id, at := fmt.Sprintf("msg_matrix_%d", time.Now().UnixNano()), time.Now()
	sig, err := ingress.SignWebhook(matrixWebhook, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(substate.HeaderWebhookID, id)
	req.Header.Set(substate.HeaderWebhookTimestamp, fmt.Sprint(at.Unix()))
	req.Header.Set(substate.HeaderWebhookSignature, sig)
}
