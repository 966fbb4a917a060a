package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/state"
)

// openView opens a real view holding the given tenants, each running.
func openView(tb testing.TB, tenants ...string) *state.DB {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	var batch []substate.Sequenced
	for i, id := range tenants {
		d := substate.EventData{TenantID: id, Provider: substate.ProviderEngine, ExecutionID: "x-" + id,
			SubState: substate.StateRunning, Revision: 1, OccurredAt: time.Unix(100, 0)}
		if i%2 == 1 {
			d.SubState, d.ErrorMessage = substate.StateError, "boom"
		}
		d.Normalize()
		batch = append(batch, substate.Sequenced{Seq: uint64(i + 1), Event: d})
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		tb.Fatal(err)
	}
	return db
}

var scopedTenants = []string{"acme-1", "acme-2", "acme-3", "acme", "acm", "beta-1", "beta-2", "zeta"}

// keyFile writes key lines to a file and returns the Keys reading it.
func keyFile(tb testing.TB, lines ...string) *httpapi.Keys {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "api-keys")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		tb.Fatal(err)
	}
	k := &httpapi.Keys{File: path}
	if err := k.Load(); err != nil {
		tb.Fatal(err)
	}
	return k
}

// openAuthServer serves the view with an authorizer and /metrics, beside
// an admin-only route of the test's own that Require guards.
func openAuthServer(tb testing.TB, a *httpapi.Authorizer, views substate.ViewStore) string {
	tb.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	})
	s := &httpapi.Server{Views: views, Auth: a, Metrics: ok}
	mux := http.NewServeMux()
	mux.Handle("GET /admin", a.Require(httpapi.ScopeAdmin)(ok))
	mux.Handle("/", s.Handler())
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv.URL
}

func getAs(tb testing.TB, url, key string, v any) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		tb.Fatalf("%s: body is not JSON: %v", url, err)
	}
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(raw, &e)
	if v != nil {
		_ = json.Unmarshal(raw, v)
	}
	if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
		tb.Errorf("%s: 401 without WWW-Authenticate", url)
	}
	return resp.StatusCode, e.Error.Code
}

func TestAuthorizedRoutes(t *testing.T) {
	keys := keyFile(t,
		keyLine("ops", "admin", "*", "key-ops"),
		keyLine("dash", "read", "*", "key-dash"),
		keyLine("portal", "read:raw", "acme-", "key-portal"))
	a, err := httpapi.NewAuthorizer("0.0.0.0:8080", keys)
	if err != nil {
		t.Fatal(err)
	}
	url := openAuthServer(t, a, openView(t, scopedTenants...))
	for _, tc := range []struct {
		name, path, key string
		status          int
		code            string
	}{
		{"NoKey", "/v1/tenants", "", 401, substate.EUNAUTHORIZED},
		{"UnknownKey", "/v1/tenants/acme-1", "key-nobody", 401, substate.EUNAUTHORIZED},
		{"NoKeyMetrics", "/metrics", "", 401, substate.EUNAUTHORIZED},
		{"ReadTenant", "/v1/tenants/zeta", "key-dash", 200, ""},
		{"ReadMetrics", "/metrics", "key-dash", 200, ""},
		{"ReadAdminRoute", "/admin", "key-dash", 403, substate.EFORBIDDEN},
		{"RawAdminRoute", "/admin", "key-portal", 403, substate.EFORBIDDEN},
		{"AdminRoute", "/admin", "key-ops", 200, ""},
		{"PrefixTenantInside", "/v1/tenants/acme-2", "key-portal", 200, ""},
		{"PrefixTenantOutside", "/v1/tenants/beta-1", "key-portal", 403, substate.EFORBIDDEN},
		{"PrefixTenantShorter", "/v1/tenants/acme", "key-portal", 403, substate.EFORBIDDEN},
		{"PrefixUnknownOutside", "/v1/tenants/nobody", "key-portal", 403, substate.EFORBIDDEN},
		{"PrefixUnknownInside", "/v1/tenants/acme-9", "key-portal", 404, substate.ENOTFOUND},
		{"Health", "/healthz", "", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, code := getAs(t, url+tc.path, tc.key, nil); status != tc.status || code != tc.code {
				t.Fatalf("%d %q, want %d %q", status, code, tc.status, tc.code)
			}
		})
	}
	t.Run("PrefixList", func(t *testing.T) {
		for _, query := range []string{"", "?limit=1", "?limit=2", "?hasError=true&limit=1", "?subState=running"} {
			got := listAll(t, url+"/v1/tenants"+query, "key-portal")
			want := filterIDs(scopedTenants, "acme-")
			if strings.Contains(query, "hasError") {
				want = []string{"acme-2"}
			} else if strings.Contains(query, "running") {
				want = []string{"acme-1", "acme-3"}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("list%s: %v, want %v", query, got, want)
			}
		}
		if got := listAll(t, url+"/v1/tenants?limit=3", "key-dash"); len(got) != len(scopedTenants) {
			t.Errorf("unscoped list: %v", got)
		}
	})
	t.Run("PrefixCount", func(t *testing.T) {
		n, err := httpapi.CountTenants(context.Background(), httpapi.ScopedViews(openView(t, scopedTenants...), "beta-"), substate.TenantFilter{})
		if err != nil || n != 2 {
			t.Fatalf("count: %d, %v; want 2", n, err)
		}
	})
}

// listAll pages through a listing and returns the tenant ids, sorted.
func listAll(tb testing.TB, url, key string) []string {
	tb.Helper()
	var ids []string
	next := ""
	for range 100 {
		u := url
		if next != "" {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			u += sep + "pageToken=" + next
		}
		var page substate.TenantPage
		if status, code := getAs(tb, u, key, &page); status != 200 {
			tb.Fatalf("%s: %d %s", u, status, code)
		}
		for _, v := range page.Tenants {
			ids = append(ids, v.TenantID)
		}
		if next = page.NextPageToken; next == "" {
			slices.Sort(ids)
			return ids
		}
	}
	tb.Fatalf("%s: paging does not end", url)
	return nil
}

func filterIDs(ids []string, prefix string) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func TestNewAuthorizer(t *testing.T) {
	none := &httpapi.Keys{}
	if err := none.Load(); err != nil {
		t.Fatal(err)
	}
	t.Run("LoopbackWithoutKeysIsAnonymous", func(t *testing.T) {
		a, err := httpapi.NewAuthorizer("127.0.0.1:8080", none)
		if err != nil {
			t.Fatal(err)
		}
		url := openAuthServer(t, a, openView(t, "acme"))
		if status, _ := getAs(t, url+"/v1/tenants/acme", "", nil); status != 200 {
			t.Errorf("anonymous read: %d", status)
		}
		if status, code := getAs(t, url+"/admin", "", nil); status != 403 || code != substate.EFORBIDDEN {
			t.Errorf("anonymous admin: %d %q, want 403", status, code)
		}
		if status, _ := getAs(t, url+"/v1/tenants/acme", "some-key", nil); status != 401 {
			t.Errorf("a key nobody configured: %d, want 401", status)
		}
	})
	t.Run("ErrExposedWithoutKeys", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:8080", ":8080", "10.1.2.3:8080"} {
			if _, err := httpapi.NewAuthorizer(addr, none); err == nil || !strings.Contains(err.Error(), "--api-keys") {
				t.Errorf("%s: %v, want a refusal naming --api-keys", addr, err)
			}
		}
	})
	t.Run("LoopbackWithKeysNeedsOne", func(t *testing.T) {
		a, err := httpapi.NewAuthorizer("127.0.0.1:8080", keyFile(t, keyLine("dash", "read", "*", "key-dash")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(httptest.NewRequest("GET", "/", nil)); substate.ErrorCode(err) != substate.EUNAUTHORIZED {
			t.Errorf("no key: %v, want EUNAUTHORIZED", err)
		}
	})
	t.Run("LoopbackKeysLoadedLater", func(t *testing.T) {
		// A key file empty at start, filled and reloaded later: from then
		// on every read needs a key, as when the keys were there at start.
		keys := keyFile(t, "# no keys yet")
		a, err := httpapi.NewAuthorizer("127.0.0.1:8080", keys)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := a.Authenticate(httptest.NewRequest("GET", "/", nil)); err != nil || p != httpapi.Anonymous {
			t.Fatalf("no keys yet: %v %v, want anonymous", p, err)
		}
		if err := os.WriteFile(keys.File, []byte(keyLine("dash", "read", "*", "key-dash")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := keys.Load(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(httptest.NewRequest("GET", "/", nil)); substate.ErrorCode(err) != substate.EUNAUTHORIZED {
			t.Errorf("no key once keys are loaded: %v, want EUNAUTHORIZED", err)
		}
	})
}

// A read key is taken from Authorization: Bearer or from X-Api-Key; with
// both, the Authorization header decides, and a blank header is no key.
func TestAuthenticateHeaders(t *testing.T) {
	a, err := httpapi.NewAuthorizer("0.0.0.0:8080", keyFile(t,
		keyLine("dash", "read", "*", "key-dash"), keyLine("ops", "admin", "*", "key-ops")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name               string
		bearer, xAPIKey    string
		wantName, wantCode string
	}{
		{"Bearer", "Bearer key-dash", "", "dash", ""},
		{"XApiKey", "", "key-dash", "dash", ""},
		{"XApiKeySpaces", "", "  key-ops ", "ops", ""},
		{"BothBearerDecides", "Bearer key-ops", "key-dash", "ops", ""},
		{"BothBadBearer", "Bearer nope", "key-dash", "", substate.EUNAUTHORIZED},
		{"XApiKeyUnknown", "", "nope", "", substate.EUNAUTHORIZED},
		{"XApiKeyBlank", "", " ", "", substate.EUNAUTHORIZED},
		{"None", "", "", "", substate.EUNAUTHORIZED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", tc.bearer)
			}
			if tc.xAPIKey != "" {
				req.Header.Set(substate.HeaderAPIKey, tc.xAPIKey)
			}
			p, err := a.Authenticate(req)
			if got := substate.ErrorCode(err); got != tc.wantCode || (err == nil && p.Name != tc.wantName) {
				t.Errorf("got %q (%v), want %q %q", p.Name, err, tc.wantName, tc.wantCode)
			}
		})
	}
}

// Keys are reloaded when the file changes and on SIGHUP; a broken file
// keeps the keys in force.
func TestKeysReload(t *testing.T) {
	keys := keyFile(t, keyLine("old", "read", "*", "key-old"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- keys.Watch(ctx, 10*time.Millisecond, nil) }()
	defer func() { cancel(); <-done }()
	write := func(lines ...string) {
		tmp := keys.File + ".new"
		if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, keys.File); err != nil { // as a Kubernetes secret update does
			t.Fatal(err)
		}
	}
	waitKey := func(key string, want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := keys.Set().Lookup(key); ok == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %q known %v, want %v", key, !want, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write(keyLine("new", "read", "*", "key-new"))
	waitKey("key-new", true)
	waitKey("key-old", false)

	write("not a key line")
	time.Sleep(50 * time.Millisecond) // several polls
	waitKey("key-new", true)
}
