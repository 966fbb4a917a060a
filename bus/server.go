package bus

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate/internal/netx"
)

// startServer starts the embedded server: JetStream, the identities of
// creds with their permissions and nothing anonymous, TLS when configured.
func startServer(c Config, creds Credentials, logger *slog.Logger) (*server.Server, error) {
	host, port, err := splitListen(c.Listen)
	if err != nil {
		return nil, err
	}
	if c.Sync != "" && c.Sync != SyncDefault && c.Sync != SyncAlways {
		return nil, fmt.Errorf("nats sync policy %q: want %q or %q", c.Sync, SyncDefault, SyncAlways)
	}
	if !c.ServerTLS.enabled() && !netx.LoopbackHost(host) {
		return nil, fmt.Errorf("refusing to run the embedded nats server on non-loopback address %s without TLS: set --nats-server-tls-cert and --nats-server-tls-key, or listen on 127.0.0.1", c.Listen)
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
	if opts.Nkeys, err = Users(creds, Consumers{Worker: WorkerConsumers(c.Instances...), Subscriber: c.SubscriberConsumers}); err != nil {
		return nil, err
	}
	if err := serverTLS(opts, c.ServerTLS); err != nil {
		return nil, err
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

// Users returns the embedded server's users: one nkey user per identity
// of creds, with its Permissions. A server with users refuses anonymous
// clients.
func Users(creds Credentials, consumers Consumers) ([]*server.NkeyUser, error) {
	if err := consumers.Check(); err != nil {
		return nil, err
	}
	var users []*server.NkeyUser
	for _, id := range Identities {
		pub, err := creds.PublicKey(id)
		if err != nil {
			return nil, err
		}
		users = append(users, &server.NkeyUser{Nkey: pub, Permissions: Permissions(id, consumers)})
	}
	return users, nil
}

// serverTLS sets the server's TLS options from t, when it has a certificate.
func serverTLS(opts *server.Options, t ServerTLS) error {
	if !t.enabled() {
		if t.ClientCA != "" {
			return fmt.Errorf("embedded nats server: a client CA needs a server certificate and key")
		}
		return nil
	}
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.ClientCA, Verify: t.ClientCA != ""})
	if err != nil {
		return fmt.Errorf("embedded nats server tls: %w", err)
	}
	opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = cfg, true, t.ClientCA != "", 2
	return nil
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
