package workertest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// A started worker is ready on random ports with its data in the test's
// temporary directory; an edit sets a flag; a worker started again on the
// data of a stopped one has its view.
func TestStartStopRestart(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.Instance = "replica-a" })
	if !strings.HasPrefix(w.HTTP.URL(), "http://127.0.0.1:") || strings.HasSuffix(w.HTTP.URL(), ":8080") {
		t.Fatalf("HTTP at %s, want a random loopback port", w.HTTP.URL())
	}
	if code, body := workertest.Get(t, w.HTTP.URL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d %s", code, body)
	}
	if w.Flags.Instance != "replica-a" || w.Flags.BatchSize != worker.DefaultFlags().BatchSize {
		t.Fatalf("flags %+v: want the edit over the defaults", w.Flags)
	}
	if err := workertest.DeliverRow(w.HTTP.URL(), "row-0", workertest.RestateRow("acme", 0)); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		if _, err := w.View.Tenant(context.Background(), "acme"); err != nil {
			return err.Error()
		}
		return ""
	})
	w.Stop(t)
	select {
	case <-w.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
	again := workertest.Start(t, workertest.DataDir(w.Flags.DataDir), func(f *worker.Flags) { f.Instance = "replica-a" })
	if v, err := again.View.Tenant(context.Background(), "acme"); err != nil || v.WorkflowSubState != substate.StateRunning {
		t.Fatalf("acme after the restart: %+v %v", v, err)
	}
}

// Wait returns the error a worker stopped with on its own.
func TestWaitReturnsWhyItStopped(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.StreamCheckEvery = 50 * time.Millisecond })
	if err := w.Bus.JetStream.DeleteStream(context.Background(), substate.StreamEvents); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(t); err == nil || !strings.Contains(err.Error(), "deleted under the running view") {
		t.Fatalf("Wait = %v, want the stream loss", err)
	}
}
