package faults_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate/testkit/faults"
)

// What the embedded nats-server does when its disk fills: JetStream stays
// enabled, but the stream that failed a write keeps that error (the
// filestore's and the stream's, never cleared) and stops answering
// publishes, even once space is free again; its Healthz reports the
// error. Restarting JetStream in the running server (ShutdownJetStream,
// then EnableJetStream with the store directory the server was started
// with) reloads the stream from disk without the error, with every
// acknowledged message.
func TestDiskFullStreamKeepsWriteError(t *testing.T) {
	dir := faults.Tmpfs(t, 32<<20)
	s := startNATS(t, dir)
	s.fill(t, 100, 1000)
	filler, err := faults.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	acked := uint64(100)
	for ; ; acked++ {
		if err := s.publish(); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("publish on a full disk: %v, want no answer (a timeout)", err)
			}
			break
		}
	}
	if !strings.Contains(s.logs.String(), "JetStream stream '$G > S' critical write error") ||
		!strings.Contains(s.logs.String(), "no space left on device") {
		t.Fatalf("server errors %q do not report the write error", s.logs)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.publish(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish after freeing the disk: %v, want still no answer", err)
	}
	hs := s.srv.Healthz(&server.HealthzOptions{})
	if !s.srv.JetStreamEnabled() || hs.Status != "unavailable" || !strings.Contains(hs.Error, "JetStream stream '$G > S' write error") {
		t.Fatalf("JetStream enabled %v, Healthz %q %q; want enabled and the stream's write error", s.srv.JetStreamEnabled(), hs.Status, hs.Error)
	}

	cfg := s.srv.JetStreamConfig()
	cfg.StoreDir = dir // JetStreamConfig has <dir>/jetstream; EnableJetStream appends it again
	if err := s.srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.EnableJetStream(cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.publish(); err != nil {
		t.Fatalf("publish after restarting JetStream: %v", err)
	}
	if st := s.state(t); st.Msgs != acked+1 || st.LastSeq != acked+1 {
		t.Fatalf("state %+v, want the %d acknowledged messages and the new one", st, acked)
	}
	if hs := s.srv.Healthz(&server.HealthzOptions{}); hs.Status != "ok" {
		t.Fatalf("Healthz after restarting JetStream: %q %q", hs.Status, hs.Error)
	}
}

// publish publishes one message on stream S, waiting briefly for the ack.
func (s *natsServer) publish() error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := s.js.Publish(ctx, "s.x", make([]byte, 1000))
	return err
}
