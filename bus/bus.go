package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
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
	CredsFile string // NATS credentials file for URL
	TLSCA     string // CA file to verify the server of URL
	TLSCert   string // client certificate file (with TLSKey) for URL
	TLSKey    string
	Name      string // connection name shown by the server
	// MaxPayload is the embedded server's largest message; 0 means 2 MiB,
	// room for a 1 MiB ingested body and its headers.
	MaxPayload int32
	Logger     *slog.Logger
}

// Bus is a NATS connection with JetStream, and the embedded server when
// there is one.
type Bus struct {
	Conn      *nats.Conn
	JetStream jetstream.JetStream

	server *server.Server
	logger *slog.Logger
}

// Open starts the embedded server when c.URL is empty, then connects.
func Open(c Config) (*Bus, error) {
	b := &Bus{logger: c.Logger}
	if b.logger == nil {
		b.logger = slog.New(slog.DiscardHandler)
	}
	addr := c.URL
	if addr == "" {
		srv, err := startServer(c, b.logger)
		if err != nil {
			return nil, err
		}
		b.server, addr = srv, srv.ClientURL()
	}
	if err := b.connect(addr, c); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
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
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	nc, err := nats.Connect(addr, opts...)
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

// Embedded reports whether the bus runs its own server.
func (b *Bus) Embedded() bool { return b.server != nil }

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

// Ready reports whether the connection is up.
func (b *Bus) Ready() bool { return b.Conn != nil && b.Conn.IsConnected() }

// Close drains the connection and shuts the embedded server down.
func (b *Bus) Close() error {
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

func startServer(c Config, logger *slog.Logger) (*server.Server, error) {
	host, port, err := splitListen(c.Listen)
	if err != nil {
		return nil, err
	}
	if c.Sync != "" && c.Sync != SyncDefault && c.Sync != SyncAlways {
		return nil, fmt.Errorf("nats sync policy %q: want %q or %q", c.Sync, SyncDefault, SyncAlways)
	}
	maxPayload := c.MaxPayload
	if maxPayload == 0 {
		maxPayload = 2 << 20
	}
	opts := &server.Options{
		ServerName: "substate",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Clean(c.StoreDir),
		SyncAlways: c.Sync == SyncAlways,
		MaxPayload: maxPayload,
		NoSigs:     true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats server: %w", err)
	}
	if err := checkListen(host, port); err != nil {
		return nil, err
	}
	srv.SetLoggerV2(serverLogger{logger}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats server did not start listening on %s", c.Listen)
	}
	return srv, nil
}

// checkListen reports why the embedded server could not listen on a fixed
// port (most often: something else listens there), which the server itself
// only logs.
func checkListen(host string, port int) error {
	if port <= 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("embedded nats server: %w (choose another --nats-listen)", err)
	}
	return l.Close()
}

func splitListen(addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", -1, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("nats listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("nats listen port %q: %w", p, err)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

// redact hides the password of a URL for logs and errors.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}
