package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/substatehq/substate/httpapi"
)

// TestWhoamiIsTheGuards: for every kind of caller, GET /v1/whoami lists
// exactly the routes whose guard lets that caller through, found by
// calling every route of the table: a page that shows a button only for a
// listed route shows none that answers 401 or 403.
func TestWhoamiIsTheGuards(t *testing.T) {
	keys := keyFile(t,
		keyLine("ops", "admin", "*", "key-admin"),
		keyLine("acme-ops", "admin", "acme-", "key-admin-acme"),
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
	tests := []struct {
		name, key string
		auth      *httpapi.Authorizer
		want      httpapi.Identity // without Routes
	}{
		{"Read", "key-read", exposed, httpapi.Identity{Name: "dash", Scope: httpapi.ScopeRead}},
		{"ReadRaw", "key-raw", exposed, httpapi.Identity{Name: "portal", Scope: httpapi.ScopeReadRaw}},
		{"Admin", "key-admin", exposed, httpapi.Identity{Name: "ops", Scope: httpapi.ScopeAdmin}},
		{"AdminOfAPrefix", "key-admin-acme", exposed, httpapi.Identity{Name: "acme-ops", Scope: httpapi.ScopeAdmin, TenantPrefix: "acme-"}},
		{"LoopbackAnonymous", "", loopback, httpapi.Identity{Name: "anonymous", Scope: httpapi.ScopeReadRaw, Anonymous: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fullServer(t, tt.auth).Handler()
			req := httptest.NewRequest(http.MethodGet, "/v1/whoami", nil)
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("whoami: %d %s", rec.Code, rec.Body)
			}
			var got httpapi.Identity
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			var allowed []string
			for _, rt := range fullServer(t, tt.auth).Routes() {
				if _, keyed := rt.Guard.Scope(); !keyed {
					continue
				}
				req := request(rt)
				if tt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tt.key)
				}
				if code := status(h, req); code != http.StatusUnauthorized && code != http.StatusForbidden {
					allowed = append(allowed, rt.Pattern())
				}
			}
			if want := allowed; !slices.Equal(got.Routes, want) {
				t.Errorf("routes %v\nwant the ones that let it in %v", got.Routes, want)
			}
			got.Routes = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("identity %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("NoKey", func(t *testing.T) {
		if code := status(fullServer(t, exposed).Handler(), httptest.NewRequest(http.MethodGet, "/v1/whoami", nil)); code != http.StatusUnauthorized {
			t.Errorf("whoami without a key: %d, want 401", code)
		}
	})
}
