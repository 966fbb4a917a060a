package httpapi

import (
	"net/http"

	"github.com/substatehq/substate/internal/httpx"
)

// Identity is the answer of GET /v1/whoami: who the request's key is and
// what it may call, so that a page offers only what the server would
// let it do.
type Identity struct {
	// Name is the key's name; "anonymous" without a key.
	Name string `json:"name"`
	// Scope is the key's scope (read:raw for the anonymous caller).
	Scope Scope `json:"scope"`
	// TenantPrefix narrows every answer to tenants whose id starts with
	// it; "" for every tenant.
	TenantPrefix string `json:"tenantPrefix"`
	// Anonymous is true for the caller of a loopback address without
	// keys, who came without one.
	Anonymous bool `json:"anonymous"`
	// Routes are the served routes, as "METHOD /path", whose guard lets
	// this caller through: the server's route table asked, so a page
	// that shows a button only for a route listed here shows none that
	// answers 403. A handler may still refuse a tenant outside the
	// prefix, or raw evidence to a key without read:raw.
	Routes []string `json:"routes"`
}

// whoami serves GET /v1/whoami: the caller's identity, from the same
// route table and guards that serve its requests.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	id := Identity{Name: p.Name, Scope: p.Scope, TenantPrefix: p.TenantPrefix, Anonymous: p.anonymous, Routes: []string{}}
	for _, rt := range s.Routes() {
		scope, guarded := rt.Guard.Scope()
		if rt.Handler == nil || !guarded {
			continue
		}
		if s.Auth.permits(p, scope, rt.Guard == GuardAdminOrLoopback) {
			id.Routes = append(id.Routes, rt.Pattern())
		}
	}
	httpx.JSON(w, http.StatusOK, id)
}
