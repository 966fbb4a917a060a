package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
)

func TestFailExitStatus(t *testing.T) {
	var out syncBuffer
	m := &Main{Stdout: &out, Stderr: &out}
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	wrapped := errors.Join(errors.New("store gone"), context.Canceled)
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"SignalledStop", stopped, context.Canceled, 0},
		{"FailureWrappingCancel", live, wrapped, 1},
		{"CancelWithoutSignal", live, context.Canceled, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := m.fail(c.ctx, c.err); got != c.want {
				t.Fatalf("fail(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}

// The unit restarts the worker after any exit it did not ask for: a fatal
// condition exits non-zero, and a crash or a kill is no exit status at all.
func TestSystemdUnitRestarts(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "substate.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nRestart=always\n", "\nStartLimitIntervalSec=0\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("deploy/systemd/substate.service lacks %q", strings.TrimSpace(want))
		}
	}
}

// The same with the real binary (this test binary re-executed, see
// TestMain) on an external NATS server: the worker's user is removed from
// the server, which closes its connection and refuses it from then on, so
// the client gives up. The process exits non-zero with one line saying
// so, which is what its unit restarts on.
func TestRunBinaryExitsNonZeroWhenNATSClosesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "worker", Password: "pw"}}}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server did not start")
	}
	url := fmt.Sprintf("nats://worker:pw@127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	httpAddr := workertest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "run", "--data-dir", t.TempDir(), "--http-addr", httpAddr, "--nats-url", url)
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	bench.DieWithParent(cmd)
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	workertest.EventuallyWithin(t, 45*time.Second, func() string {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return "worker not ready: " + err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("worker not ready: %d", resp.StatusCode)
		}
		return ""
	})
	revoked := *opts
	revoked.Users = []*server.User{{Username: "someone-else", Password: "pw"}}
	if err := srv.ReloadOptions(&revoked); err != nil {
		t.Fatal(err)
	}
	var err2 error
	select {
	case err2 = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("worker still running a minute after nats closed its connection:\n%s", logs.String())
	}
	var ee *exec.ExitError
	if !errors.As(err2, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("worker exit: %v, want a non-zero status\n%s", err2, logs.String())
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "substate: nats connection closed: ") || !strings.Contains(strings.ToLower(last), "authorization") {
		t.Fatalf("last line %q, want the closed connection and why\n%s", last, logs.String())
	}
}
