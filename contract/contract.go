// Package contract holds the machine-readable contracts substate ships and
// the worker serves (httpapi mounts them): the JSON Schemas of its CloudEvents' data
// (schemas/event.json, schemas/change.json), the AsyncAPI 3 document of its
// subjects and streams and the OpenAPI 3.1 document of its HTTP API.
package contract

import (
	"embed"
	"io/fs"
	"path"
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

// Files holds the documents (openapi.json, asyncapi.json) and the
// schemas (schemas/event.json, …) as the worker's HTTP server serves them
// (httpapi.Server.Contract).
func Files() fs.FS { return files }
