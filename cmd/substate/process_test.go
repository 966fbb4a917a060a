package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// The tests of this package run the worker as a process: "substate run"
// in a child process (this test binary re-executed, see TestMain), which
// a test can kill with a real signal and whose exit status it reads, and
// which the commands under test reach as they reach any worker. The
// worker's own tests run it in process, in worker/e2e.

// process is "substate run" in a child process.
type process struct {
	cmd           *exec.Cmd
	dataDir       string
	httpURL, nats string
	nkey          string      // the worker's seed on its embedded server
	logs          *syncBuffer // what it wrote to stderr
}

// startProcess starts "substate run" on dataDir with small batches and a
// short ack wait (for the crash tests), HTTP on httpAddr and the embedded
// NATS server on natsAddr (none when empty: extra says where NATS is), and
// waits until it is ready. It is killed when the test ends.
func startProcess(tb testing.TB, dataDir, httpAddr, natsAddr string, extra ...string) *process {
	tb.Helper()
	return spawn(tb, dataDir, httpAddr, natsAddr, append([]string{"--batch-size", "64", "--ack-wait", "2s"}, extra...)...)
}

// startWorkerProcess starts "substate run" on dataDir with free ports,
// logging from warn up and the extra flags, and waits until it is ready:
// the worker the commands under test talk to. It is killed when the test
// ends. A free port is closed before the child binds it, so a test of
// another package running meanwhile can take it first: a child that
// cannot bind is started again on other ports (twice at most).
func startWorkerProcess(tb testing.TB, dataDir string, extra ...string) *process {
	tb.Helper()
	args := append([]string{"--log-level", "warn"}, extra...)
	for attempt := 1; ; attempt++ {
		p := launch(tb, dataDir, workertest.FreeAddr(tb), workertest.FreeAddr(tb), args...)
		if p.ready(tb, attempt < 3) {
			return p
		}
		tb.Logf("the worker could not bind its ports (taken meanwhile), starting it again: %s", lastLine(p.logs.String()))
	}
}

// spawn starts "substate run" on the addresses given and waits until it
// is ready; it is killed when the test ends.
func spawn(tb testing.TB, dataDir, httpAddr, natsAddr string, extra ...string) *process {
	tb.Helper()
	p := launch(tb, dataDir, httpAddr, natsAddr, extra...)
	p.ready(tb, false)
	return p
}

// launch starts "substate run" in a child process, killed when the test
// ends, whose log the test shows if it failed.
func launch(tb testing.TB, dataDir, httpAddr, natsAddr string, extra ...string) *process {
	tb.Helper()
	args := []string{"-test.run=^$", "--", "run", "--data-dir", dataDir, "--http-addr", httpAddr}
	if natsAddr != "" {
		args = append(args, "--nats-listen", natsAddr)
	}
	cmd := exec.Command(os.Args[0], append(args, extra...)...)
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	bench.DieWithParent(cmd)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("worker log:\n%s", logs.String())
		}
	})
	p := &process{cmd: cmd, dataDir: dataDir, httpURL: "http://" + httpAddr, nats: "nats://" + natsAddr, logs: logs}
	p.nkey = p.seed(bus.Worker)
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return p
}

// ready waits until the worker answers /readyz with 200 and reports true;
// it fails the test when the worker is not ready within 45 s (a worker on
// a cluster that is still electing leaders retries its start-up for up to
// 30 s). With bindRetry, a worker that says a port of its is in use is
// reaped and false reported at once instead, even when whatever holds its
// HTTP port answered /readyz. Each probe waits at most 2 s: what holds
// the port may accept a connection and never answer.
func (p *process) ready(tb testing.TB, bindRetry bool) bool {
	tb.Helper()
	deadline := time.Now().Add(45 * time.Second)
	probe := &http.Client{Timeout: 2 * time.Second}
	for {
		if bindRetry && strings.Contains(p.logs.String(), "address already in use") {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			return false
		}
		resp, err := probe.Get(p.httpURL + "/readyz")
		var msg string
		switch {
		case err != nil:
			msg = "worker not ready: " + err.Error()
		case resp.StatusCode != http.StatusOK:
			resp.Body.Close()
			msg = fmt.Sprintf("worker not ready: %d", resp.StatusCode)
		default:
			resp.Body.Close()
			if !bindRetry || !strings.Contains(p.logs.String(), "address already in use") {
				return true
			}
			continue // what answered is not this worker: the check above reaps it
		}
		if time.Now().After(deadline) {
			tb.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// seed is the seed file of one of the worker's NATS identities.
func (p *process) seed(id bus.Identity) string {
	return (bus.Credentials{Dir: worker.NATSCredentialsDir(p.dataDir)}).SeedFile(id)
}

// natsArgs are the flags of a command that reads the worker's streams.
func (p *process) natsArgs() []string { return []string{"--nats-url", p.nats, "--nats-nkey", p.nkey} }

// bus connects to the worker's NATS as the worker does, until the test
// ends.
func (p *process) bus(tb testing.TB) *bus.Bus {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: p.nats, NkeyFile: p.nkey})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func (p *process) kill(tb testing.TB) {
	tb.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

func (p *process) terminate(tb testing.TB) {
	tb.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			tb.Fatalf("worker did not exit cleanly on SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines go to the log
		<-exited
		tb.Fatal("worker did not exit within 30 s of SIGTERM")
	}
}

// runBinary runs a command as the substate binary (this test binary
// re-executed) and returns its exit status and output: for what a
// command does as a process, such as "substate run" refusing to start.
func runBinary(tb testing.TB, args ...string) (int, string, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	bench.DieWithParent(cmd)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		tb.Fatalf("substate %v: %v", args, err)
	}
	return 0, out.String(), errOut.String()
}
