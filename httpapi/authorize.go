package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/internal/netx"
)

// Principal is who made a request: the key it presented (or none, on a
// loopback address without keys) with that key's scope and tenant prefix.
type Principal struct {
	Name         string // the key's name; "anonymous" without a key
	Scope        Scope
	TenantPrefix string // only tenants whose id starts with it; "" for every tenant

	anonymous bool // came without a key: only Anonymous, never a key named "anonymous"
}

// Can reports whether the principal's scope includes s.
func (p Principal) Can(s Scope) bool { return p.Scope.Includes(s) }

// Unredacted reports whether the principal sees provider input and output
// as received (admin), rather than redacted.
func (p Principal) Unredacted() bool { return p.Can(ScopeAdmin) }

// SeesTenant reports whether the principal may see tenant id.
func (p Principal) SeesTenant(id string) bool { return strings.HasPrefix(id, p.TenantPrefix) }

// CheckTenant returns the 403 error for a tenant outside the principal's
// prefix, nil for one inside it.
func (p Principal) CheckTenant(id string) error {
	if p.SeesTenant(id) {
		return nil
	}
	return substate.Errorf(substate.EFORBIDDEN, "key %q may only read tenants whose id starts with %q", p.Name, p.TenantPrefix)
}

// Anonymous is the principal of a request without a key where none is
// needed: a loopback address with no keys configured. It reads
// everything, provider evidence redacted.
var Anonymous = Principal{Name: "anonymous", Scope: ScopeReadRaw, anonymous: true}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal an Authorizer put on the request's
// context; ok is false on a route no Authorizer guards.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Authorizer checks the key of each request to the read API: sent as
// "Authorization: Bearer KEY" or as "X-Api-Key: KEY" (a client that can
// set a header but not a bearer token), looked up in Keys; a request with
// both is judged by its Authorization header. Without a key, a request
// is the Anonymous principal when AllowAnonymous is set and Keys holds no
// key at that moment (keys a reload brings close the door), and 401
// otherwise; a key that is not configured is always 401.
type Authorizer struct {
	Keys           *Keys
	AllowAnonymous bool
}

// NewAuthorizer returns the Authorizer for a server listening on addr:
// without keys, a loopback address lets every request in as Anonymous (the
// zero-configuration default) and any other address is refused with an
// error saying what to configure; with keys, every request needs one.
func NewAuthorizer(addr string, keys *Keys) (*Authorizer, error) {
	if netx.Loopback(addr) {
		return &Authorizer{Keys: keys, AllowAnonymous: true}, nil
	}
	if keys.Set().Len() > 0 {
		return &Authorizer{Keys: keys}, nil
	}
	return nil, substate.Errorf(substate.EINVALID,
		"refusing to serve the read API on non-loopback address %s without API keys: set --api-keys-file or --api-keys (see docs/security.md)", addr)
}

// Require returns a middleware that lets a request through only when its
// principal has scope, with the principal on the request's context; 401
// without a valid key, 403 with a key of a narrower scope.
func (a *Authorizer) Require(scope Scope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return a.guard(scope, false, next)
	}
}

// guard is Require; anonymousActs also lets the anonymous caller of a
// loopback address without keys through, whatever scope needs.
func (a *Authorizer) guard(scope Scope, anonymousActs bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err == nil && !a.permits(p, scope, anonymousActs) {
			err = substate.Errorf(substate.EFORBIDDEN, "key %q has scope %s; %s %s needs %s", p.Name, p.Scope, r.Method, r.URL.Path, scope)
		}
		if err != nil {
			writeAuthError(w, r, err, nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// Authenticate returns the principal of a request. A nil Authorizer
// checks no key: every request is Anonymous.
func (a *Authorizer) Authenticate(r *http.Request) (Principal, error) {
	if a == nil {
		return Anonymous, nil
	}
	h, x := r.Header.Get("Authorization"), r.Header.Get(substate.HeaderAPIKey)
	if h == "" && x == "" && a.AllowAnonymous && a.Keys.Set().Len() == 0 {
		return Anonymous, nil
	}
	key, ok := bearer(h)
	if h == "" {
		key = strings.TrimSpace(x)
		ok = key != ""
	}
	if !ok {
		return Principal{}, substate.Errorf(substate.EUNAUTHORIZED, "missing API key: send Authorization: Bearer <key> (or X-Api-Key: <key>)")
	}
	k, found := a.Keys.Set().Lookup(key)
	if !found {
		return Principal{}, substate.Errorf(substate.EUNAUTHORIZED, "unknown API key")
	}
	return Principal{Name: k.Name, Scope: k.Scope, TenantPrefix: k.TenantPrefix}, nil
}

// permits reports whether p passes a guard that needs scope; anonymousActs
// also lets the anonymous caller of a loopback address without keys pass.
func (a *Authorizer) permits(p Principal, scope Scope, anonymousActs bool) bool {
	return p.Can(scope) || (anonymousActs && a.loopbackAnonymous(p))
}

// loopbackAnonymous reports whether p came in without a key where none is
// needed.
func (a *Authorizer) loopbackAnonymous(p Principal) bool {
	return a == nil || (a.AllowAnonymous && p == Anonymous)
}

// writeAuthError writes an authentication or authorization error; a 401
// says which scheme to use.
func writeAuthError(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	if substate.ErrorCode(err) == substate.EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", `Bearer realm="substate"`)
	}
	httpx.Error(w, r, err, log)
}

// bearer returns the credential of an "Authorization: Bearer" header.
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}
