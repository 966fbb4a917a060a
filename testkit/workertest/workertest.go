// Package workertest starts a substate worker in process for a test, and
// drives a running worker (in process or a child process) as its users
// do: provider deliveries over HTTP, reads of its API, the streams it
// writes, waits until it has settled.
package workertest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/worker"
)

// StartLimit is how long Start waits for a worker to open and be ready,
// and Stop for it to stop: a bound against a hang, never a judgement of
// speed.
const StartLimit = 30 * time.Second

// Flags returns the flags of a worker for a test: worker.DefaultFlags on
// a fresh temporary data directory, HTTP and the embedded NATS server on
// random loopback ports, logs from warn up; then each edit, in order.
func Flags(tb testing.TB, edits ...func(*worker.Flags)) worker.Flags {
	tb.Helper()
	f := worker.DefaultFlags()
	f.DataDir, f.HTTPAddr, f.NATSListen, f.LogLevel = tb.TempDir(), "127.0.0.1:0", "127.0.0.1:0", slog.LevelWarn
	for _, edit := range edits {
		edit(&f)
	}
	return f
}

// DataDir is an edit that puts the worker's data in dir: a restart on the
// data of a worker before it.
func DataDir(dir string) func(*worker.Flags) {
	return func(f *worker.Flags) { f.DataDir = dir }
}

// Worker is a worker running in process, as "substate run" runs it,
// until it stops or its test ends.
type Worker struct {
	*worker.Worker
	ctx     context.Context // the command's: cancelled as SIGTERM cancels it
	cancel  context.CancelFunc
	started bool          // Run was called
	done    chan struct{} // closed when Run has returned and the worker is closed
	err     error         // Run's error, once done is closed
	waited  bool          // the test took Run's error with Wait
	logs    *termtext.SyncBuffer
}

// Start opens a worker with Flags(tb, edits...), runs it and waits until
// it is ready (its /readyz would answer 200). Its logs are shown if the
// test fails. When the test ends it is stopped with Stop.
func Start(tb testing.TB, edits ...func(*worker.Flags)) *Worker {
	tb.Helper()
	w := Open(tb, Flags(tb, edits...))
	w.Run()
	w.WaitReady(tb)
	return w
}

// Open opens a worker with f, as "substate run" does before it runs the
// worker's parts (Run runs them): a test of what a worker is before its
// first batch. It is stopped when the test ends.
func Open(tb testing.TB, f worker.Flags) *Worker {
	tb.Helper()
	logs := &termtext.SyncBuffer{}
	w := &Worker{Worker: worker.New(f), done: make(chan struct{}), logs: logs}
	w.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: f.LogLevel}))
	tb.Cleanup(func() {
		if tb.Failed() && logs.String() != "" {
			tb.Logf("worker log (%s):\n%s", f.DataDir, logs.String())
		}
	})
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if err := w.Worker.Open(w.ctx); err != nil {
		w.cancel()
		tb.Fatalf("open worker: %v\n%s", err, logs.String())
	}
	tb.Cleanup(func() { w.Stop(tb) })
	return w
}

// Run runs the opened worker's parts in the background until Stop, or
// until one of them fails (Done, Wait), then closes the worker.
func (w *Worker) Run() {
	w.started = true
	go func() {
		err := w.Worker.Run(w.ctx)
		w.Worker.Close()
		w.err = err
		close(w.done)
	}()
}

// WaitReady waits until the worker's readiness check passes.
func (w *Worker) WaitReady(tb testing.TB) {
	tb.Helper()
	EventuallyWithin(tb, StartLimit, func() string {
		select {
		case <-w.done:
			tb.Fatalf("the worker stopped before it was ready: %v\n%s", w.err, w.logs.String())
		default:
		}
		if err := w.Ready(); err != nil {
			return "worker not ready: " + err.Error()
		}
		return ""
	})
}

// Done is closed once the worker has stopped, by Stop or on its own.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Wait waits until the worker stops on its own and returns why: the error
// "substate run" would exit non-zero with. A worker that runs on for
// StartLimit fails the test.
func (w *Worker) Wait(tb testing.TB) error {
	tb.Helper()
	select {
	case <-w.done:
	case <-time.After(StartLimit):
		tb.Fatalf("the worker still runs after %s\n%s", StartLimit, w.logs.String())
	}
	w.waited = true
	return w.err
}

// Logs returns what the worker logged so far: for a test of what it
// logs, and how often.
func (w *Worker) Logs() string { return w.logs.String() }

// Stop stops the worker as SIGTERM does and waits until it has closed. It
// fails the test if the worker does not stop, or stopped with an error the
// test did not take with Wait or Err that is not the cancellation a
// signal causes. Stopping a stopped worker does nothing more.
func (w *Worker) Stop(tb testing.TB) {
	tb.Helper()
	w.cancel()
	if !w.started {
		w.Worker.Close()
		return
	}
	select {
	case <-w.done:
	case <-time.After(StartLimit):
		tb.Errorf("the worker did not stop within %s\n%s", StartLimit, w.logs.String())
		return
	}
	if w.err != nil && !w.waited && !errors.Is(w.err, context.Canceled) {
		tb.Errorf("the worker stopped with an error: %v", w.err)
	}
	w.waited = true // said once
}

// Err returns what the worker's Run returned, once Done is closed (nil
// before).
func (w *Worker) Err() error {
	select {
	case <-w.done:
		w.waited = true
		return w.err
	default:
		return nil
	}
}
