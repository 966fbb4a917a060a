package httpapi

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/substatehq/substate"
)

// Guard is who may call a route: the credential it takes. The table gives
// every route one, and the server checks it before the route's handler
// runs; a route that reads one tenant also checks the key's tenant prefix
// in its handler.
type Guard string

// Guards of the routes.
const (
	// GuardPublic routes take no credential: health, the contract
	// documents, the console's page and assets.
	GuardPublic Guard = "public"
	// GuardIngest routes take their provider's ingest credential, which
	// their handler checks (X-Api-Key, a Standard Webhooks signature);
	// read-API keys do not apply.
	GuardIngest Guard = "ingest"
	// GuardRead routes need a read-API key with scope read.
	GuardRead Guard = "read"
	// GuardReadRaw routes need read:raw.
	GuardReadRaw Guard = "read:raw"
	// GuardAdmin routes need admin; the anonymous caller of a loopback
	// address without keys (read:raw) is refused.
	GuardAdmin Guard = "admin"
	// GuardAdminOrLoopback routes need admin, or come from the anonymous
	// caller of a loopback address without keys, who acts as the
	// loopback operator (LoopbackOperator): the zero-configuration
	// worker's execution actions.
	GuardAdminOrLoopback Guard = "admin-or-loopback"
	// GuardReadCookie is GuardRead taking the key from KeyCookie when the
	// request has no Authorization header: a page's EventSource sends
	// cookies, not headers. Only a read-only stream takes it.
	GuardReadCookie Guard = "read-or-cookie"
)

// KeyCookie is where the console's page keeps the key it was given, for
// the route a browser cannot send a header to (GuardReadCookie).
const KeyCookie = "substate_console_key"

// Scope returns the scope a guard needs of a read-API key; ok is false
// for GuardPublic and GuardIngest, which check none, and for a guard that
// is none of these.
func (g Guard) Scope() (s Scope, ok bool) {
	switch g {
	case GuardRead, GuardReadCookie:
		return ScopeRead, true
	case GuardReadRaw:
		return ScopeReadRaw, true
	case GuardAdmin, GuardAdminOrLoopback:
		return ScopeAdmin, true
	}
	return "", false
}

// guard puts a route's handler behind its guard, checked with the
// server's Authorizer. A route without a known guard is a mistake in the
// table, refused when the server builds its routes rather than served
// open.
func (s *Server) guard(rt Route, next http.Handler) http.Handler {
	scope, ok := rt.Guard.Scope()
	if !ok {
		if rt.Guard != GuardPublic && rt.Guard != GuardIngest {
			panic(fmt.Sprintf("httpapi: route %s has no known guard (%q)", rt.Pattern(), rt.Guard))
		}
		return next
	}
	h := s.Auth.guard(scope, rt.Guard == GuardAdminOrLoopback, next)
	if rt.Guard == GuardReadCookie {
		h = keyFromCookie(h)
	}
	return h
}

// keyFromCookie sends a request that carries no key in a header on with
// the key of KeyCookie as its bearer token.
func keyFromCookie(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ck, err := r.Cookie(KeyCookie); err == nil && ck.Value != "" && r.Header.Get("Authorization") == "" && r.Header.Get(substate.HeaderAPIKey) == "" {
			if k, err := url.QueryUnescape(ck.Value); err == nil {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+k)
			}
		}
		next.ServeHTTP(w, r)
	})
}
