package bus_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

func openTLS(tb testing.TB, t bus.ServerTLS) *bus.Bus {
	tb.Helper()
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: tb.TempDir(), ServerTLS: t})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func TestEmbeddedTLS(t *testing.T) {
	p := bustest.NewPKI(t)
	b := openTLS(t, bus.ServerTLS{Cert: p.Cert, Key: p.Key})
	if !b.Ready() || !strings.HasPrefix(b.ClientURL(), "tls://") {
		t.Fatalf("ready %v, url %q; want a tls:// URL", b.Ready(), b.ClientURL())
	}
	creds, _ := b.Credentials()
	t.Run("ClientWithTLSAndNkey", func(t *testing.T) {
		other, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.CA, NkeyFile: creds.SeedFile(bus.Subscriber)})
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
	})
	t.Run("ErrPlainText", func(t *testing.T) {
		plain, err := net.Dial("tcp", strings.TrimPrefix(b.ClientURL(), "tls://"))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		_ = plain.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, _ := plain.Read(buf)
		if !strings.Contains(string(buf[:n]), `"tls_required":true`) {
			t.Fatalf("server INFO %q does not require TLS", buf[:n])
		}
		opts, _ := creds.Options(bus.Worker)
		if nc, err := nats.Connect(b.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Fatal("connected without trusting the server's CA")
		}
	})
	t.Run("TaskServiceInProcess", func(t *testing.T) {
		nc, err := b.ConnectAs(bus.Tasks, "tasks")
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	})
}

func TestEmbeddedTLSClientCertificates(t *testing.T) {
	p := bustest.NewPKI(t)
	b := openTLS(t, bus.ServerTLS{Cert: p.Cert, Key: p.Key, ClientCA: p.CA})
	creds, _ := b.Credentials()
	if _, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.CA, NkeyFile: creds.SeedFile(bus.Worker)}); err == nil {
		t.Fatal("a client without a certificate connected")
	}
	other, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.CA, TLSCert: p.Cert, TLSKey: p.Key, NkeyFile: creds.SeedFile(bus.Worker)})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
}

func TestNonLoopbackListenNeedsTLS(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		b, err := bus.Open(bus.Config{Listen: listen, StoreDir: t.TempDir()})
		if err == nil {
			b.Close()
			t.Fatalf("%s: started without TLS", listen)
		}
		if !strings.Contains(err.Error(), "without TLS") || !strings.Contains(err.Error(), "--nats-server-tls-cert") {
			t.Errorf("%s: error %q does not say what to set", listen, err)
		}
	}
	if _, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ServerTLS: bus.ServerTLS{ClientCA: "ca.pem"}}); err == nil {
		t.Error("a client CA without a server certificate was accepted")
	}
}
