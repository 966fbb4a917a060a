package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/worker"
)

// The flags several commands embed: where NATS is (ClientFlags), which
// running worker to ask (ServerFlags), how to print records
// (OutputFlags), and how to show the providers' evidence (RedactFlags).

// ClientFlags connect a command to the NATS a worker uses.
type ClientFlags struct {
	NATSURL   string `name:"nats-url" help:"NATS server URL (default nats://127.0.0.1:4222, where a worker's embedded server listens by default)."`
	NATSCreds string `name:"nats-creds" type:"existingfile" help:"NATS credentials file."`
	NATSNkey  string `name:"nats-nkey" type:"existingfile" help:"NATS nkey seed file (default: the worker's, under --data-dir, when there)."`
	NATSTLSCA string `name:"nats-tls-ca" type:"existingfile" help:"CA certificate to verify the NATS server with."`
	DataDir   string `default:"./data" help:"Data directory of the worker whose embedded NATS server to connect to: its credentials are read there."`
}

// DefaultNATSURL is where a command looks for NATS without --nats-url.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// URL is the NATS URL to dial: --nats-url, or DefaultNATSURL.
func (f ClientFlags) URL() string { return cmp.Or(f.NATSURL, DefaultNATSURL) }

// Connect dials NATS and returns the connection with JetStream. Without
// credentials it authenticates as the worker whose data directory is
// DataDir, when that has the embedded server's credentials: whoever reads
// that directory holds the worker's data anyway.
func (f ClientFlags) Connect() (*nats.Conn, jetstream.JetStream, error) {
	return f.ConnectAs(bus.Worker)
}

// ConnectAs is Connect with the identity whose seed under DataDir is the
// default: a task service connects as bus.Tasks.
func (f ClientFlags) ConnectAs(id bus.Identity) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("substate-cli")}
	if f.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(f.NATSCreds))
	}
	nkey := f.NATSNkey
	if seed := (bus.Credentials{Dir: worker.NATSCredentialsDir(f.DataDir)}).SeedFile(id); nkey == "" && f.NATSCreds == "" && fileExists(seed) {
		nkey = seed
	}
	if nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(nkey)
		if err != nil {
			return nil, nil, fmt.Errorf("nats nkey %s: %w", nkey, err)
		}
		opts = append(opts, opt)
	}
	if f.NATSTLSCA != "" {
		opts = append(opts, nats.RootCAs(f.NATSTLSCA))
	}
	nc, err := nats.Connect(f.URL(), opts...)
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, nil, fmt.Errorf("nats at %s refused the credentials: give the worker's --data-dir (its credentials are read there) or --nats-nkey: %w", f.URL(), err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connect to nats at %s (is \"substate run\" running?): %w", f.URL(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// ServerFlags say which running worker to ask.
type ServerFlags struct {
	Server string `default:"http://127.0.0.1:8080" help:"Base URL of a running substate worker."`
	APIKey string `name:"api-key" help:"Read-API key, sent as Authorization: Bearer (needed once the worker has keys)."`
}

// Client is the API client of the worker the flags name.
func (f ServerFlags) Client() *httpapi.Client {
	return &httpapi.Client{URL: f.Server, APIKey: f.APIKey}
}

// OutputFlags choose how a command prints the records it reads: every
// command that prints records embeds them, so each prints the same four
// ways (termtext.Printer).
type OutputFlags struct {
	Output string `short:"o" enum:"table,wide,json,yaml" default:"table" placeholder:"FORMAT" help:"How to print: table, wide (more columns), json or yaml (JSON's field names)."`
	JSON   bool   `name:"json" help:"Print JSON: the same as -o json."`
}

// Validate refuses --json with another -o.
func (f *OutputFlags) Validate() error {
	if f.JSON && f.Output != string(termtext.FormatTable) && f.Output != string(termtext.FormatJSON) {
		return substate.Errorf(substate.EINVALID, "--json is -o json: give one of --json and -o %s", f.Output)
	}
	return nil
}

// Printer returns the printer of the format the flags say, writing to w.
func (f *OutputFlags) Printer(w io.Writer) *termtext.Printer {
	format := termtext.Format(f.Output)
	if f.JSON {
		format = termtext.FormatJSON
	}
	return &termtext.Printer{W: w, Format: format}
}

// RedactFlags choose how a command shows the providers' execution input
// and output it reads from the streams: redacted as the read API shows
// them to read:raw callers, unless asked otherwise.
type RedactFlags struct {
	Unredacted  bool     `help:"Show the providers' execution input and output as received, secrets included, instead of redacted."`
	RedactAllow []string `name:"redact-allow" sep:"none" placeholder:"JSONPATH" help:"Field of the execution input and output to show (RFC 9535 JSONPath), repeatable; the tenant rule's fields are always shown."`
	TenantRule  []string `sep:"none" placeholder:"RULE" help:"The worker's tenant rules (its --tenant-rule): their input fields are shown."`
}

// redactor returns what redacts a raw payload for output: nil with
// --unredacted.
func (f RedactFlags) redactor() (func([]byte) []byte, error) {
	if f.Unredacted {
		return nil, nil
	}
	p, err := worker.RedactionPolicy(f.TenantRule, f.RedactAllow)
	if err != nil {
		return nil, err
	}
	return func(b []byte) []byte { return httpapi.RedactEvidence(b, p) }, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
