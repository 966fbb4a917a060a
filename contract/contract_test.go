package contract_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/contracttest"
)

// TestOpenAPIRoutes: every route of the HTTP server's table is an
// operation of openapi.json, and every operation is a route of the table.
func TestOpenAPIRoutes(t *testing.T) {
	v, err := contracttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range v.Doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	registered := routePatterns(t)
	if len(registered) < 10 {
		t.Fatalf("found only %d routes in the code: %v", len(registered), registered)
	}
	for _, r := range registered {
		if !documented[r] {
			t.Errorf("route %s is registered but not in contract/openapi.json", r)
		}
	}
	for op := range documented {
		if !slices.Contains(registered, op) {
			t.Errorf("openapi.json documents %s, which no code registers", op)
		}
	}
}

// routePatterns returns the routes of the server's table as openapi.json
// names them: method and path.
func routePatterns(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, r := range (&httpapi.Server{}).Routes() {
		if p := r.Method + " " + contracttest.OpenAPIPath(r.Path); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func eachGoFile(tb testing.TB, fn func(*ast.File)) {
	tb.Helper()
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "examples" || d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(f)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// TestServed: the worker's contract routes serve the documents and the
// schemas, and an unknown schema is a 404 with the JSON error body.
func TestServed(t *testing.T) {
	mux := (&httpapi.Server{Contract: contract.Files()}).Handler()
	for path, want := range map[string]string{
		"/v1/openapi.json": "application/json", "/v1/asyncapi.json": "application/json",
		"/v1/schemas/event.json": "application/schema+json", "/v1/schemas/change.json": "application/schema+json",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var v map[string]any
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != want || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/schemas/nothing.json", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"not_found"`) {
		t.Errorf("unknown schema: %d %s", rec.Code, rec.Body)
	}
}

// asyncAPI is the part of an AsyncAPI 3.0 document substate's reads.
type asyncAPI struct {
	AsyncAPI           string                                       `json:"asyncapi"`
	ID                 string                                       `json:"id"`
	Info               struct{ Title, Version, Description string } `json:"info"`
	DefaultContentType string                                       `json:"defaultContentType"`
	Servers            map[string]struct {
		Host, Protocol, Description string
	} `json:"servers"`
	Channels   map[string]asyncChannel   `json:"channels"`
	Operations map[string]asyncOperation `json:"operations"`
	Components struct {
		Messages map[string]json.RawMessage `json:"messages"`
	} `json:"components"`
}

type asyncChannel struct {
	Address     string                     `json:"address"`
	Title       string                     `json:"title"`
	Description string                     `json:"description"`
	Parameters  map[string]json.RawMessage `json:"parameters"`
	Messages    map[string]struct {
		Ref string `json:"$ref"`
	} `json:"messages"`
}

type asyncOperation struct {
	Action  string `json:"action"`
	Summary string `json:"summary"`
	Channel struct {
		Ref string `json:"$ref"`
	} `json:"channel"`
}

// TestOpenAPITenantFilter: every condition of a tenant listing can be
// asked for with a query parameter openapi.json declares for GET
// /v1/tenants, and the server accepts every value a parameter's enum lists.
func TestOpenAPITenantFilter(t *testing.T) {
	v, err := contracttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	op := v.Doc.Paths.Find("/v1/tenants").Get
	set := map[string]bool{}
	for _, ref := range op.Parameters {
		p := ref.Value
		values := []string{"1"}
		switch s := p.Schema.Value; {
		case s.Example != nil:
			values = []string{fmt.Sprint(s.Example)}
		case len(s.Enum) > 0:
			values = values[:0]
			for _, e := range s.Enum {
				values = append(values, fmt.Sprint(e))
			}
		case s.Type.Is("boolean"):
			values = []string{"true"}
		}
		for _, val := range values {
			f, err := httpapi.ParseTenantFilter(map[string][]string{p.Name: {val}})
			if err != nil {
				t.Errorf("%s=%s, as openapi.json allows: %v", p.Name, val, err)
			}
			fv := reflect.ValueOf(f)
			for i := range fv.NumField() {
				if !fv.Field(i).IsZero() {
					set[fv.Type().Field(i).Name] = true
				}
			}
		}
	}
	for _, field := range reflect.VisibleFields(reflect.TypeFor[substate.TenantFilter]()) {
		if !set[field.Name] {
			t.Errorf("TenantFilter.%s: no query parameter of GET /v1/tenants in openapi.json sets it", field.Name)
		}
	}
}

// TestAsyncAPI: the document parses as AsyncAPI 3.0 (no unknown member,
// references resolve, every address parameter declared) and names every
// subject the code publishes on.
func TestAsyncAPI(t *testing.T) {
	b, err := contract.Document(contract.AsyncAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc asyncAPI
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("asyncapi.json: %v", err)
	}
	if doc.AsyncAPI != "3.0.0" || doc.Info.Title == "" || doc.Info.Version == "" || len(doc.Channels) == 0 {
		t.Fatalf("not an AsyncAPI 3.0.0 document: %+v", doc)
	}
	for name, ch := range doc.Channels {
		for _, p := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(ch.Address, -1) {
			if _, ok := ch.Parameters[p[1]]; !ok {
				t.Errorf("channel %s: parameter %s of %q not declared", name, p[1], ch.Address)
			}
		}
		for m, ref := range ch.Messages {
			if _, ok := doc.Components.Messages[strings.TrimPrefix(ref.Ref, "#/components/messages/")]; !ok {
				t.Errorf("channel %s: message %s refers to %q, which is not there", name, m, ref.Ref)
			}
		}
	}
	for name, op := range doc.Operations {
		if _, ok := doc.Channels[strings.TrimPrefix(op.Channel.Ref, "#/channels/")]; !ok || (op.Action != "send" && op.Action != "receive") {
			t.Errorf("operation %s: action %q, channel %q", name, op.Action, op.Channel.Ref)
		}
	}
	for _, subject := range publishedSubjects(t) {
		if !slices.ContainsFunc(addresses(doc), func(a *regexp.Regexp) bool { return a.MatchString(subject) }) {
			t.Errorf("the code publishes on %s, which no channel of asyncapi.json names", subject)
		}
	}
}

// addresses returns the channel addresses as patterns: a parameter is one
// subject token.
func addresses(doc asyncAPI) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, ch := range doc.Channels {
		p := regexp.QuoteMeta(ch.Address)
		p = regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(p, `[^.]+`)
		out = append(out, regexp.MustCompile("^"+p+"$"))
	}
	return out
}

// publishedSubjects returns subjects the code publishes on: those its
// subject functions make for every raw kind, stage, sub-state and provider
// (with hostile tenant ids), and every "substate.…" string literal of the
// module's non-test files that is a whole subject (not a prefix).
func publishedSubjects(tb testing.TB) []string {
	tb.Helper()
	out := []string{substate.TaskSubject("billing", "charge"), substate.TaskSubject("a.b", "c d"), engine.ControlSubject}
	for _, a := range []substate.ExecutionAction{substate.ActionStop, substate.ActionRetry, substate.ActionRestart} {
		out = append(out, substate.AuditSubject(a, "acme.eu *>"))
	}
	for _, p := range []substate.Provider{substate.ProviderStepFunctions, substate.ProviderRestate, substate.ProviderEngine} {
		out = append(out, substate.UnresolvedSubject(p, "arn:aws:states:us-east-1:1:execution:x:acme.eu *>"))
	}
	for _, k := range []substate.RawKind{substate.RawEventBridge, substate.RawStepFunctionsPoll, substate.RawRestate, substate.RawEngine} {
		out = append(out, substate.RawSubject(k))
	}
	for _, st := range []string{substate.StageIngest, substate.StageNormalize, substate.StageProject, substate.StageForward,
		substate.StageEngine, substate.StageReconcile, substate.StageRenormalize} {
		out = append(out, substate.DLQSubject(st))
	}
	for _, tenant := range []string{"acme", "acme.eu *>", strings.Repeat("é", 128)} {
		out = append(out, substate.EventsSubject(tenant))
		for _, s := range substate.SubStates {
			for _, p := range []substate.Provider{substate.ProviderStepFunctions, substate.ProviderRestate, substate.ProviderEngine, ""} {
				out = append(out, substate.ChangeSubject(&substate.Change{TenantID: tenant, New: substate.TenantView{WorkflowSubState: s, Provider: p}}))
			}
		}
	}
	eachGoFile(tb, func(f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if isAttributeKey(n) {
				return false // an OpenTelemetry attribute (substate.tenant.id), not a subject
			}
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && wholeSubject.MatchString(s) {
					out = append(out, s)
				}
			}
			return true
		})
	})
	return out
}

// isAttributeKey reports whether n is attribute.Key("…"): the name of a
// span attribute.
func isAttributeKey(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "attribute" && sel.Sel.Name == "Key"
}

// wholeSubject is a literal subject under substate. that is not a prefix
// or a wildcard filter.
var wholeSubject = regexp.MustCompile(`^substate\.[a-z]+(\.[a-z-]+)+$`)

func TestMain(m *testing.M) {
	if _, err := os.Stat(filepath.Join("..", "go.mod")); err != nil {
		panic("contract tests read the module's sources from ..")
	}
	os.Exit(m.Run())
}
