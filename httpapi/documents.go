package httpapi

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// document serves the contract document name (openapi.json,
// asyncapi.json) from s.Contract.
func (s *Server) document(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(s.Contract, name)
		if err != nil {
			httpx.Error(w, r, substate.Errorf(substate.ENOTFOUND, "no document %s", name), nil)
			return
		}
		serveDocument(w, "application/json", b)
	}
}

// schema serves GET /v1/schemas/{name} (substate.SchemaPath): the JSON
// Schema schemas/{name} of s.Contract.
func (s *Server) schema(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := fs.ReadFile(s.Contract, path.Join("schemas", name))
	if err != nil || strings.Contains(name, "/") {
		httpx.Error(w, r, substate.Errorf(substate.ENOTFOUND, "no schema %s", substate.QuotePrefix(name, substate.QuoteLimit)), nil)
		return
	}
	serveDocument(w, "application/schema+json", b)
}

// serveDocument writes a contract document, cacheable for five minutes.
func serveDocument(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}
