package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Sync policies of the embedded server's JetStream store.
const (
	SyncDefault = "default" // the server's periodic flush (every 2 minutes)
	SyncAlways  = "always"  // flush every write before acknowledging it
)

// Config says where NATS is. An empty URL runs the embedded server.
type Config struct {
	URL       string // existing NATS deployment; "" runs the embedded server
	Listen    string // embedded server's client address, host:port (port 0 or -1 picks one)
	StoreDir  string // embedded server's JetStream store
	Sync      string // SyncDefault or SyncAlways; embedded server only
	CredsFile string // NATS credentials file (JWT and seed) for URL
	NkeyFile  string // nkey seed file for URL
	TLSCA     string // CA file to verify the server of URL
	TLSCert   string // client certificate file (with TLSKey) for URL
	TLSKey    string
	Name      string // connection name shown by the server
	// MaxPayload is the embedded server's largest message; 0 means 2 MiB,
	// room for a 1 MiB ingested body and its headers.
	MaxPayload int32
	Logger     *slog.Logger

	// CredentialsDir holds the embedded server's identities (see
	// Credentials), created on first start; "" means <StoreDir>/credentials.
	CredentialsDir string
	// ServerTLS is the embedded server's certificate. Required when Listen
	// is not a loopback address.
	ServerTLS ServerTLS
	// Instances are the projector instances, besides the default one,
	// whose durable consumers subscribers may not touch (WorkerConsumers).
	Instances []string
	// SubscriberConsumers are the embedded server's names for the
	// subscribers' consumers (Consumers.Subscriber); nil means
	// DefaultSubscriberConsumers.
	SubscriberConsumers []string
}

// ServerTLS is the embedded server's TLS configuration.
type ServerTLS struct {
	Cert, Key string // PEM certificate and key files
	// ClientCA, when set, makes the server require a client certificate
	// signed by this CA from every client, besides its nkey.
	ClientCA string
}

// enabled reports whether a certificate is configured.
func (t ServerTLS) enabled() bool { return t.Cert != "" || t.Key != "" }

// Bus is a NATS connection with JetStream, and the embedded server when
// there is one.
type Bus struct {
	Conn      *nats.Conn
	JetStream jetstream.JetStream

	server *server.Server
	creds  Credentials
	opts   []nats.Option // what the connection authenticates with
	tls    bool          // the embedded server requires TLS
	logger *slog.Logger

	storeDir string                // the embedded server's store directory
	storeErr atomic.Pointer[error] // the store's write error, see WatchStore
	dirs     storeDirs             // the store's directories as first seen, see WatchStore

	closing atomic.Bool   // Close was called: a closed connection is expected
	lost    chan struct{} // closed when the connection closed on its own
	lostErr atomic.Value  // error: why it closed
}

// Open starts the embedded server when c.URL is empty, then connects: to
// the embedded server as the Worker identity, to c.URL with the
// credentials c gives.
func Open(c Config) (*Bus, error) {
	b := &Bus{logger: c.Logger, lost: make(chan struct{})}
	if b.logger == nil {
		b.logger = slog.New(slog.DiscardHandler)
	}
	addr := c.URL
	if addr == "" {
		if err := b.startServer(c); err != nil {
			return nil, err
		}
		addr = b.serverURL()
	} else if err := b.clientAuth(c); err != nil {
		return nil, err
	}
	if err := b.connect(addr, c); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// startServer creates the credentials and starts the embedded server.
func (b *Bus) startServer(c Config) error {
	dir := c.CredentialsDir
	if dir == "" {
		dir = filepath.Join(c.StoreDir, "credentials")
	}
	creds, err := EnsureCredentials(dir)
	if err != nil {
		return err
	}
	if b.opts, err = creds.Options(Worker); err != nil {
		return err
	}
	if b.server, err = startServer(c, creds, b.logger); err != nil {
		return err
	}
	b.creds, b.tls, b.storeDir = creds, c.ServerTLS.enabled(), storePath(c)
	b.dirs.remember(b.storeDir)
	if b.tls {
		// The worker reaches its own server in process: the certificate
		// is for remote clients, whose names it carries.
		b.opts = append(b.opts, nats.InProcessServer(b.server))
	}
	return nil
}

// clientAuth collects the options that authenticate to c.URL.
func (b *Bus) clientAuth(c Config) error {
	if c.CredsFile != "" {
		b.opts = append(b.opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NkeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(c.NkeyFile)
		if err != nil {
			return fmt.Errorf("nats nkey %s: %w", c.NkeyFile, err)
		}
		b.opts = append(b.opts, opt)
	}
	if c.TLSCA != "" {
		b.opts = append(b.opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		b.opts = append(b.opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return nil
}

// connect dials url with reconnects that never give up: while NATS is away
// publishes fail fast and the worker reports itself unready instead of exiting.
func (b *Bus) connect(addr string, c Config) error {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		// No reconnect buffer: while NATS is away a publish fails at once and
		// ingress answers 503 instead of holding the request.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil when the connection is closed on purpose
				b.logger.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(b.closed),
	}
	nc, err := nats.Connect(addr, append(opts, b.opts...)...)
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", redact(addr), err)
	}
	// An asynchronous publish whose ack never comes (the stream lost its
	// leader mid-publish) fails after the timeout instead of waiting forever.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream: %w", err)
	}
	b.Conn, b.JetStream = nc, js
	return nil
}

// closed is the connection's closed handler. Reconnects never give up, so
// a connection closes on its own only when the server or the client found
// it unusable (a protocol error such as "maximum control line exceeded",
// an authorization revoked): the bus is then lost for good, and Lost
// says so.
func (b *Bus) closed(nc *nats.Conn) {
	if b.closing.Load() {
		return
	}
	err := nc.LastError()
	if err == nil {
		err = nats.ErrConnectionClosed
	}
	b.lostErr.Store(fmt.Errorf("nats connection closed: %w", err))
	close(b.lost)
}

// Lost returns a channel closed when the connection closed other than by
// Close; LostErr then says why. A worker treats it as fatal.
func (b *Bus) Lost() <-chan struct{} { return b.lost }

// LostErr returns why the connection closed on its own, or nil.
func (b *Bus) LostErr() error {
	err, _ := b.lostErr.Load().(error)
	return err
}

// Embedded reports whether the bus runs its own server.
func (b *Bus) Embedded() bool { return b.server != nil }

// Credentials returns the embedded server's identities; ok is false
// without an embedded server.
func (b *Bus) Credentials() (c Credentials, ok bool) { return b.creds, b.server != nil }

// ConnectAs opens another connection, as the identity id on the embedded
// server (in process when it requires TLS), or with the bus's own
// credentials on an existing NATS deployment, whose operator gives each
// program its user. The caller closes it.
func (b *Bus) ConnectAs(id Identity, name string) (*nats.Conn, error) {
	if b.server == nil {
		nc, err := nats.Connect(b.Conn.ConnectedUrl(), append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, b.opts...)...)
		if err != nil {
			return nil, fmt.Errorf("connect to nats: %w", err)
		}
		return nc, nil
	}
	opts, err := b.creds.Options(id)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.MaxReconnects(-1))
	if b.tls {
		opts = append(opts, nats.InProcessServer(b.server))
	}
	nc, err := nats.Connect(b.serverURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats as %s: %w", id, err)
	}
	return nc, nil
}

// serverURL is the URL the bus's own connections dial: in process with
// TLS, the plain scheme, since an in-process client does no handshake.
func (b *Bus) serverURL() string {
	if b.tls {
		return strings.Replace(b.server.ClientURL(), "tls://", "nats://", 1)
	}
	return b.server.ClientURL()
}

// ClientURL returns the URL other processes can connect to.
func (b *Bus) ClientURL() string {
	if b.server != nil {
		return b.server.ClientURL()
	}
	if b.Conn != nil {
		return b.Conn.ConnectedUrlRedacted()
	}
	return ""
}

// Ready reports whether the bus can take writes (see Health).
func (b *Bus) Ready() bool { return b.Health() == nil }

// Close drains the connection and shuts the embedded server down.
func (b *Bus) Close() error {
	b.closing.Store(true)
	var err error
	if b.Conn != nil {
		if derr := b.Conn.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
			err = derr
		}
		b.Conn.Close()
	}
	if b.server != nil {
		b.server.Shutdown()
		b.server.WaitForShutdown()
	}
	return err
}

// redact hides the password of a URL for logs and errors.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}
