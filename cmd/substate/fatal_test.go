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

	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// startWorkerMain runs "substate run" in process like startWorker, but
// hands back its exit code and output instead of expecting a clean stop.
func startWorkerMain(tb testing.TB, dataDir string, extra ...string) (*worker.Worker, <-chan int, *syncBuffer) {
	tb.Helper()
	ready := make(chan *worker.Worker, 1)
	var out syncBuffer
	m := &Main{Stdout: &out, Stderr: &out, Ready: func(w *worker.Worker) { ready <- w }}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	args := append([]string{"run", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, args) }()
	select {
	case w := <-ready:
		return w, done, &out
	case code := <-done:
		tb.Fatalf("substate run exited with %d: %s", code, out.String())
	case <-time.After(30 * time.Second):
		tb.Fatal("substate run did not start")
	}
	return nil, nil, nil
}

// waitExit waits for the command's exit code.
func waitExit(tb testing.TB, done <-chan int, out *syncBuffer) int {
	tb.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(30 * time.Second):
		tb.Fatalf("substate run did not exit: %s", out.String())
	}
	return 0
}

// The fault of the first reproduction: a protocol line over the
// server's 4 KB limit makes nats-server refuse it and close the client's
// connection, for good. The worker exits non-zero with one line saying so
// instead of idling (or exiting 0) without a connection.
func TestRunExitsNonZeroWhenNATSConnectionCloses(t *testing.T) {
	w, done, out := startWorkerMain(t, t.TempDir())
	_ = w.Bus.Conn.Publish("substate."+strings.Repeat("a", 5000), nil)
	code := waitExit(t, done, out)
	if code == 0 {
		t.Fatalf("exit status 0 after the nats connection closed; output:\n%s", out)
	}
	var last string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(l, "substate: ") {
			last = l
		}
	}
	if !strings.Contains(last, "nats connection closed") || !strings.Contains(strings.ToLower(last), "maximum control line exceeded") {
		t.Fatalf("exit %d, last line %q; want the closed connection and why; output:\n%s", code, last, out)
	}
}

// A part of the worker a flag turns off is left out of the run group, not
// run and returned at once: that would read as a part stopping on its own
// and end the worker (--evidence-check-interval 0, "never", did).
func TestRunWithPartsOff(t *testing.T) {
	w, done, out := startWorkerMain(t, t.TempDir(), "--evidence-check-interval", "0",
		"--ingest-max-backlog", "0", "--ingest-max-in-flight", "0", "--sfn-reconcile", "off")
	select {
	case code := <-done:
		t.Fatalf("substate run exited %d with its optional parts off:\n%s", code, out)
	case <-time.After(2 * time.Second):
	}
	if err := w.Ready(); err != nil {
		t.Errorf("not ready: %v", err)
	}
}

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
	httpAddr := freePort(t)
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
	eventuallyWithin(t, 45*time.Second, func() string {
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
