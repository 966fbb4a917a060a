package bus_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate/bus"
)

// pki writes a CA and a certificate it signed for 127.0.0.1 (server and
// client use) under dir, and returns their files.
type pki struct{ ca, cert, key string }

func newPKI(tb testing.TB) pki {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "substate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "substate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := pki{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	writePEM(tb, p.ca, "CERTIFICATE", caDER)
	writePEM(tb, p.cert, "CERTIFICATE", der)
	writePEM(tb, p.key, "EC PRIVATE KEY", keyDER)
	return p
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}

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
	p := newPKI(t)
	b := openTLS(t, bus.ServerTLS{Cert: p.cert, Key: p.key})
	if !b.Ready() || !strings.HasPrefix(b.ClientURL(), "tls://") {
		t.Fatalf("ready %v, url %q; want a tls:// URL", b.Ready(), b.ClientURL())
	}
	creds, _ := b.Credentials()
	t.Run("ClientWithTLSAndNkey", func(t *testing.T) {
		other, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.ca, NkeyFile: creds.SeedFile(bus.Subscriber)})
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
	p := newPKI(t)
	b := openTLS(t, bus.ServerTLS{Cert: p.cert, Key: p.key, ClientCA: p.ca})
	creds, _ := b.Credentials()
	if _, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.ca, NkeyFile: creds.SeedFile(bus.Worker)}); err == nil {
		t.Fatal("a client without a certificate connected")
	}
	other, err := bus.Open(bus.Config{URL: b.ClientURL(), TLSCA: p.ca, TLSCert: p.cert, TLSKey: p.key, NkeyFile: creds.SeedFile(bus.Worker)})
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
