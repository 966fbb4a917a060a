package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// rank is the scopes' order, written out apart from the code under test.
var rank = map[string]int{"read": 1, "read:raw": 2, "admin": 3}

// FuzzAuthorize checks the scope and tenant-prefix decisions against their
// definitions: a key passes a route when its widest scope is at least the
// route's, and sees a tenant when the id starts with its prefix; no key or
// another key is 401, anything else refused is 403.
func FuzzAuthorize(f *testing.F) {
	f.Add("read", "acme-", "read", "acme-1", "secret", "secret")
	f.Add("read,admin", "*", "read:raw", "zeta", "secret", "secret")
	f.Add("read:raw", "acme-", "admin", "acme-1", "secret", "secret")
	f.Add("read", "acme-", "read", "acm", "secret", "secret")
	f.Add("admin", "a", "read", "", "secret", "other")
	f.Add("read", "é", "read", "\xff", "secret", "")
	f.Fuzz(func(t *testing.T, scopes, prefix, need, tenant, key, presented string) {
		if key == "" || strings.ContainsAny(key+scopes+prefix, " \t\r\n;#") || scopes == "" || prefix == "" {
			return
		}
		keys, err := httpapi.ParseKeys(keyLine("k", scopes, prefix, key))
		if err != nil {
			return // ParseKeys's own tests cover refusals
		}
		k := &httpapi.Keys{Text: keyLine("k", scopes, prefix, key)}
		if err := k.Load(); err != nil {
			t.Fatal(err)
		}
		widest := 0
		for _, s := range strings.Split(scopes, ",") {
			widest = max(widest, rank[s])
		}
		want := http.StatusOK
		switch {
		case strings.TrimSpace(presented) != key: // header values lose surrounding white space
			want = http.StatusUnauthorized
		case rank[need] == 0 || widest < rank[need]:
			want = http.StatusForbidden
		case prefix != "*" && !strings.HasPrefix(tenant, prefix):
			want = http.StatusForbidden
		}
		a := &httpapi.Authorizer{Keys: k}
		h := a.Require(httpapi.Scope(need))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := httpapi.ScopedViews(fakeViews{}, keys[0].TenantPrefix).Tenant(r.Context(), tenant); err != nil {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			p, _ := httpapi.PrincipalFrom(r.Context())
			if err := p.CheckTenant(tenant); err != nil {
				t.Fatalf("CheckTenant refuses %q that ScopedViews lets through", tenant)
			}
		}))
		req := httptest.NewRequest(http.MethodGet, "/v1/tenants/x", nil)
		if presented != "" {
			req.Header.Set("Authorization", "Bearer "+presented)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("key %q scopes %q prefix %q, route needs %q, tenant %q, presented %q: %d, want %d",
				key, scopes, prefix, need, tenant, presented, rec.Code, want)
		}
	})
}

// fakeViews answers every tenant read.
type fakeViews struct{ substate.ViewStore }

func (fakeViews) Tenant(_ context.Context, id string) (substate.TenantView, error) {
	return substate.TenantView{TenantID: id}, nil
}
