package httpapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/httpapi"
)

// fullServer has every dependency, so it serves every route of the table.
func fullServer(tb testing.TB, a *httpapi.Authorizer) *httpapi.Server {
	tb.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	})
	var got substate.ExecutionRequest
	db := openView(tb, "acme-1")
	return &httpapi.Server{
		Auth: a, Ready: func() error { return nil }, Metrics: ok,
		Ingest: ingesters{substate.ProviderStepFunctions: ok, substate.ProviderRestate: ok},
		Views:  db, Checkpoint: db, History: storyReader{}, Executions: recordingService(&got), Jobs: fakeJobs(&jobCalls{}),
		Events: eventFeed{}, DeadLetters: deadLetterBox{},
		Contract: contract.Files(),
		Console:  console{Page: ok, Assets: ok, Overview: ok, DeadLetters: ok, Requeue: ok, Changes: ok},
	}
}

// request returns a request that the route's pattern matches.
func request(rt httpapi.Route) *http.Request {
	path := strings.NewReplacer("{id}", "acme-1", "{action}", "stop", "{op}", "pause", "{seq}", "1", "{name}", "event.json", "{$}", "").Replace(rt.Path)
	if strings.HasSuffix(path, "/") && path != "/" {
		path += "app.js" // below a subtree
	}
	if path == "/v1/groups" {
		path += "?by=subState" // required
	}
	req := httptest.NewRequest(rt.Method, path, nil)
	if rt.Method == http.MethodPost {
		body := "{}"
		if path == "/v1/actions" {
			body = `{"action":"retry","filter":{}}`
		}
		req = httptest.NewRequest(rt.Method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// TestRoutesAreTheMux: the router serves exactly the table, each route
// once and at its own pattern, and a server without a dependency leaves
// that dependency's routes out.
func TestRoutesAreTheMux(t *testing.T) {
	t.Run("Full", func(t *testing.T) {
		s := fullServer(t, nil)
		mux, registered := httpapi.Mux(s)
		var table []string
		for _, rt := range s.Routes() {
			if rt.Handler == nil {
				t.Errorf("%s: no handler on a server with every dependency", rt.Pattern())
			}
			if slices.Contains(table, rt.Pattern()) {
				t.Errorf("%s: twice in the table", rt.Pattern())
			}
			table = append(table, rt.Pattern())
			if _, pattern := mux.Handler(request(rt)); pattern != rt.Pattern() {
				t.Errorf("%s: a request to it is routed to %q", rt.Pattern(), pattern)
			}
		}
		if !slices.Equal(registered, table) {
			t.Errorf("registered %v\nwant the table %v", registered, table)
		}
	})
	t.Run("NothingButHealth", func(t *testing.T) {
		_, registered := httpapi.Mux(&httpapi.Server{})
		if want := []string{"GET /healthz", "GET /readyz"}; !slices.Equal(registered, want) {
			t.Errorf("a server without dependencies registers %v, want %v", registered, want)
		}
	})
	t.Run("NotInTheTable", func(t *testing.T) {
		mux, _ := httpapi.Mux(fullServer(t, nil))
		for _, path := range []string{"/v1/ingest/nowhere", "/v1/tenants/acme-1/other", "/console/api/nowhere", "/v1/view", "/index.html"} {
			if _, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, path, nil)); pattern != "" {
				t.Errorf("GET %s is routed to %q", path, pattern)
			}
		}
	})
}

// TestRoutesGuards walks every route with every kind of credential and
// checks that the server lets in exactly whom the route's Guard names.
func TestRoutesGuards(t *testing.T) {
	keys := keyFile(t,
		keyLine("ops", "admin", "*", "key-admin"),
		keyLine("portal", "read:raw", "*", "key-raw"),
		keyLine("dash", "read", "*", "key-read"))
	exposed, err := httpapi.NewAuthorizer("0.0.0.0:8080", keys)
	if err != nil {
		t.Fatal(err)
	}
	loopback, err := httpapi.NewAuthorizer("127.0.0.1:8080", &httpapi.Keys{})
	if err != nil {
		t.Fatal(err)
	}
	credentials := []struct {
		name, key string
		cookie    bool
		xAPIKey   bool          // sent as X-Api-Key rather than a bearer token
		scope     httpapi.Scope // "" without a key
	}{
		{"NoKey", "", false, false, ""},
		{"Read", "key-read", false, false, httpapi.ScopeRead},
		{"ReadRaw", "key-raw", false, false, httpapi.ScopeReadRaw},
		{"Admin", "key-admin", false, false, httpapi.ScopeAdmin},
		{"ReadInCookie", "key-read", true, false, httpapi.ScopeRead},
		{"ReadAsXApiKey", "key-read", false, true, httpapi.ScopeRead},
		{"AdminAsXApiKey", "key-admin", false, true, httpapi.ScopeAdmin},
	}
	for _, rt := range fullServer(t, exposed).Routes() {
		t.Run(rt.Pattern(), func(t *testing.T) {
			need, keyed := rt.Guard.Scope()
			if !keyed && rt.Guard != httpapi.GuardPublic && rt.Guard != httpapi.GuardIngest {
				t.Fatalf("unknown guard %q", rt.Guard)
			}
			h := fullServer(t, exposed).Handler()
			for _, c := range credentials {
				req := request(rt)
				switch {
				case c.cookie:
					req.AddCookie(&http.Cookie{Name: httpapi.KeyCookie, Value: c.key})
				case c.xAPIKey:
					req.Header.Set(substate.HeaderAPIKey, c.key)
				case c.key != "":
					req.Header.Set("Authorization", "Bearer "+c.key)
				}
				sent := c.scope != "" && (!c.cookie || rt.Guard == httpapi.GuardReadCookie)
				want := http.StatusOK
				switch {
				case keyed && !sent:
					want = http.StatusUnauthorized
				case keyed && !c.scope.Includes(need):
					want = http.StatusForbidden
				}
				if got := status(h, req); got != want {
					t.Errorf("%s: %d, want %d", c.name, got, want)
				}
			}
			// On loopback without keys, a caller without one is the
			// anonymous read:raw principal, who may act on executions.
			want := http.StatusOK
			if keyed && !httpapi.ScopeReadRaw.Includes(need) && rt.Guard != httpapi.GuardAdminOrLoopback {
				want = http.StatusForbidden
			}
			if got := status(fullServer(t, loopback).Handler(), request(rt)); got != want {
				t.Errorf("LoopbackAnonymous: %d, want %d", got, want)
			}
		})
	}
}

// status serves req and returns its status, 200 for any success.
func status(h http.Handler, req *http.Request) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code/100 == 2 {
		return http.StatusOK
	}
	return rec.Code
}

// TestOneRouteTable: of the non-test files of the module, only routes.go
// makes a router, and none registers on the default one, so no route is
// served that the table does not list.
func TestOneRouteTable(t *testing.T) {
	var found []string
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "examples" || d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "http" && slices.Contains([]string{"NewServeMux", "Handle", "HandleFunc"}, sel.Sel.Name) {
					found = append(found, filepath.ToSlash(path)+": http."+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"../httpapi/routes.go: http.NewServeMux"}; !slices.Equal(found, want) {
		t.Errorf("routers and registrations %v, want only %v", found, want)
	}
}

// BenchmarkIngestRoute is what the server adds to an ingest request on its
// way to the ingress's handler: routing, the guard, the JSON check and
// the middleware.
func BenchmarkIngestRoute(b *testing.B) {
	accept := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	h := (&httpapi.Server{Ingest: ingesters{substate.ProviderStepFunctions: accept}}).Handler()
	req := httptest.NewRequest(http.MethodPost, "/v1/ingest/eventbridge", nil)
	req.Header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
