// Package contract holds the machine-readable contracts substate ships and
// the worker serves: the JSON Schemas of its CloudEvents' data
// (schemas/event.json, schemas/change.json), the AsyncAPI 3 document of its
// subjects and streams and the OpenAPI 3.1 document of its HTTP API.
package contract

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

//go:embed schemas/*.json openapi.json asyncapi.json
var files embed.FS

// Documents of the contract.
const (
	OpenAPIFile  = "openapi.json"
	AsyncAPIFile = "asyncapi.json"
)

// Document returns the OpenAPI or AsyncAPI document.
func Document(name string) ([]byte, error) { return fs.ReadFile(files, name) }

// Schema returns the JSON Schema named name ("event.json", "change.json").
func Schema(name string) ([]byte, error) {
	return fs.ReadFile(files, path.Join("schemas", name))
}

// Routes returns the HTTP routes that serve the contracts: GET
// /v1/schemas/{name} (substate.SchemaPath), /v1/openapi.json and
// /v1/asyncapi.json.
func Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /v1/schemas/{name}": http.HandlerFunc(serveSchema),
		"GET /v1/openapi.json":   document(OpenAPIFile),
		"GET /v1/asyncapi.json":  document(AsyncAPIFile),
	}
}

func document(name string) http.Handler {
	b, err := Document(name)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { serve(w, "application/json", b) })
}

func serveSchema(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := Schema(name)
	if err != nil || strings.Contains(name, "/") {
		httpx.Error(w, r, substate.Errorf(substate.ENOTFOUND, "no schema %s", substate.QuotePrefix(name, substate.QuoteLimit)), nil)
		return
	}
	serve(w, "application/schema+json", b)
}

func serve(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}
