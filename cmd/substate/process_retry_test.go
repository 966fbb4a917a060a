package main

import (
	"net"
	"testing"

	"github.com/substatehq/substate/testkit/workertest"
)

// TestWorkerProcessPortTaken: a worker whose HTTP port another program
// took after it was picked is reaped and reported not ready (so
// startWorkerProcess starts it again on other ports), instead of the
// test waiting 45 s for a worker that has exited.
func TestWorkerProcessPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	p := launch(t, dir, taken.Addr().String(), workertest.FreeAddr(t), "--log-level", "warn")
	if p.ready(t, true) {
		t.Fatal("a worker whose HTTP port is taken answered ready")
	}
	if p.cmd.ProcessState == nil {
		t.Fatal("the worker that could not bind was not reaped")
	}
	startWorkerProcess(t, dir) // the same data directory, other ports
}
