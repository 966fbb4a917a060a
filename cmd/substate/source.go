package main

import (
	"cmp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/worker"
)

// DefaultServer is the worker a command asks when no --server is given.
const DefaultServer = "http://127.0.0.1:8080"

// SourceFlags say where a command reads the retained streams: through a
// running worker's HTTP API with a read key, as every other command asks
// it, or from NATS directly, as an operator on the worker's host does
// (the worker's credentials are read under --data-dir). HTTP when
// --server (SUBSTATE_SERVER) is given; else NATS when a NATS flag is
// given or the data directory holds the worker's credentials; else HTTP
// to DefaultServer.
type SourceFlags struct {
	Server      string `help:"Base URL of a running worker to read through its HTTP API (default, when no NATS flag is given and --data-dir holds no worker credentials: http://127.0.0.1:8080)."`
	APIKey      string `name:"api-key" help:"Read-API key for --server, sent as Authorization: Bearer (needed once the worker has keys)."`
	ClientFlags `embed:""`
}

// overHTTP reports whether the command reads through the HTTP API.
func (f *SourceFlags) overHTTP() bool {
	if f.Server != "" {
		return true
	}
	if f.NATSURL != "" || f.NATSCreds != "" || f.NATSNkey != "" {
		return false
	}
	return !fileExists((bus.Credentials{Dir: worker.NATSCredentialsDir(f.DataDir)}).SeedFile(bus.Worker))
}

// client is the API client of the worker --server names.
func (f *SourceFlags) client() *httpapi.Client {
	return &httpapi.Client{URL: cmp.Or(f.Server, DefaultServer), APIKey: f.APIKey}
}

// redaction returns how to redact the payloads read from NATS by r (nil:
// as they are). Over HTTP the worker redacts what it serves by the key
// (admin sees payloads unredacted), so r's flags are refused there.
func (f *SourceFlags) redaction(r RedactFlags) (func([]byte) []byte, error) {
	if !f.overHTTP() {
		return r.redactor()
	}
	for _, flag := range []struct {
		name string
		set  bool
	}{{"--unredacted", r.Unredacted}, {"--redact-allow", len(r.RedactAllow) > 0}, {"--tenant-rule", len(r.TenantRule) > 0}} {
		if flag.set {
			return nil, substate.Errorf(substate.EINVALID,
				"%s applies to the streams read from NATS; over HTTP the worker redacts the payloads for every key but an admin one", flag.name)
		}
	}
	return nil, nil
}
