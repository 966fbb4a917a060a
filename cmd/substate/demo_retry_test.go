package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestDemoStayRetry walks the operator's story on the demo, as a new user
// would: "substate demo --stay", then list the failed tenants, describe the
// one whose courier was down, retry it, and watch it succeed; start an
// order that waits, stop it with a cause and see the cause. The demo then
// stays until its worker fails, and exits non-zero with it.
//
// The worker here is the demo command's own, which "substate demo" runs
// in its process; Main.Ready hands it to the test. It is the command under
// test, not a worker the test builds, so TestNoWorkerInProcess allows it.
func TestDemoStayRetry(t *testing.T) {
	var out, errOut syncBuffer
	ready := make(chan *worker.Worker, 1)
	m := &Main{Stdout: &out, Stderr: &errOut, Ready: func(w *worker.Worker) { ready <- w }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- m.Run(ctx, []string{"demo", "--stay", "--tenants", "5", "--data-dir", t.TempDir(),
			"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"})
	}()
	var w *worker.Worker
	select {
	case w = <-ready:
	case code := <-done:
		t.Fatalf("demo exited %d before it stayed\n%s\n%s", code, out.String(), errOut.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the demo did not settle:\n%s%s", out.String(), errOut.String())
	}
	server := w.HTTP.URL()
	// What it suggests reaches the worker it keeps, on its real port.
	for _, want := range []string{"The console stays at " + server + "/",
		`substate executions retry cyberdyne --reason "the courier is back" --server ` + server + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "start the worker again") {
		t.Errorf("the demo keeps its worker, yet says to start one:\n%s", out.String())
	}

	code, list, stderr := runCLI(t, "tenants", "list", "--sub-state", "failed", "--server", server)
	if code != 0 || !strings.Contains(list, "cyberdyne") || !strings.Contains(list, "courier") {
		t.Fatalf("tenants list --sub-state failed: %d\n%s%s", code, list, stderr)
	}
	code, desc, stderr := runCLI(t, "executions", "describe", "cyberdyne", "--server", server)
	if code != 0 || !strings.Contains(desc, "fulfill_order") {
		t.Fatalf("executions describe: %d\n%s%s", code, desc, stderr)
	}
	if code, res, stderr := runCLI(t, "executions", "retry", "cyberdyne", "--reason", "the courier is back", "--server", server); code != 0 {
		t.Fatalf("executions retry: %d\n%s%s", code, res, stderr)
	}
	workertest.Eventually(t, func() string {
		_, got, _ := runCLI(t, "tenants", "get", "cyberdyne", "--server", server, "--json")
		if !strings.Contains(got, `"workflowSubState": "succeeded"`) {
			return "cyberdyne did not succeed after the retry:\n" + got
		}
		return ""
	})

	// Stop a running one, with a cause: a new order that waits an hour.
	file := filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(file, []byte("name: slow\nversion: \"1\"\nstartAt: nap\nstates:\n  nap: {type: Wait, seconds: 3600, next: done}\n  done: {type: Success}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, got, stderr := runCLI(t, "workflow", "start", file, "--tenant", "initech", "--nats-url", w.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, w.Bus, bus.Worker)); code != 0 {
		t.Fatalf("workflow start: %d\n%s%s", code, got, stderr)
	}
	workertest.Eventually(t, func() string {
		if _, got, _ := runCLI(t, "tenants", "get", "initech", "--server", server, "--json"); !strings.Contains(got, `"workflowSubState": "waiting"`) {
			return "initech is not waiting:\n" + got
		}
		return ""
	})
	if code, got, stderr := runCLI(t, "executions", "stop", "initech", "--reason", "the customer left", "--server", server); code != 0 {
		t.Fatalf("executions stop: %d\n%s%s", code, got, stderr)
	}
	workertest.Eventually(t, func() string {
		_, got, _ := runCLI(t, "tenants", "get", "initech", "--server", server, "--json")
		for _, want := range []string{`"workflowSubState": "failed"`, `"workflowVerb": "cancelled"`, `"workflowErrorMessage": "Stopped: the customer left"`} {
			if !strings.Contains(got, want) {
				return "initech after the stop lacks " + want + ":\n" + got
			}
		}
		return ""
	})

	// A control line over the server's limit closes the worker's NATS
	// connection for good: the demo must not keep a dead console open.
	_ = w.Bus.Conn.Publish("substate."+strings.Repeat("a", 5000), nil)
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(errOut.String(), "nats connection closed") {
			t.Errorf("demo exited %d after its worker failed; want non-zero with the reason:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the demo stayed after its worker failed:\n%s", errOut.String())
	}
}
