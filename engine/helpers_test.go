package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/natstest"
)

// epoch is the manual clock's start in every test.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// harness is an engine on an embedded NATS server with a manual clock and
// a recording publisher.
type harness struct {
	ns    *server.Server
	nc    *nats.Conn
	rec   *natstest.Recorder
	clock *ManualClock
	path  string
	eng   *Engine
}

func newHarness(tb testing.TB) *harness {
	tb.Helper()
	ns := natstest.Server(tb)
	h := &harness{ns: ns, nc: natstest.Conn(tb, ns), rec: &natstest.Recorder{},
		clock: NewManualClock(epoch), path: filepath.Join(tb.TempDir(), "engine.db")}
	tb.Cleanup(func() { checkDB(tb, h.path) }) // runs after the engines' Close
	h.open(tb)
	return h
}

// checkDB runs bbolt's consistency check on a closed engine database.
func checkDB(tb testing.TB, path string) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Errorf("open db for check: %v", err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			first = cmp.Or(first, err)
		}
		return first
	})
	if err != nil {
		tb.Errorf("db check: %v", err)
	}
}

// open opens a new engine on the harness's store (after a close, it resumes).
func (h *harness) open(tb testing.TB) *Engine {
	tb.Helper()
	e := NewEngine(h.path)
	e.Conn, e.Publisher, e.Clock = h.nc, h.rec, h.clock
	e.Logger = slog.New(slog.DiscardHandler)
	e.Jitter = func() float64 { return 0 } // no jitter
	e.ServeControl = false
	e.TaskTimeout = 5 * time.Second
	if err := e.Open(); err != nil {
		tb.Fatalf("open engine: %v", err)
	}
	tb.Cleanup(func() { _ = e.Close() })
	h.eng = e
	return e
}

// start registers a definition and starts an execution of it.
func (h *harness) start(tb testing.TB, def, name, input string) Execution {
	tb.Helper()
	ctx := context.Background()
	ref, err := h.eng.EnsureWorkflow(ctx, Workflow{Definition: []byte(def)})
	if err != nil {
		tb.Fatalf("ensure workflow: %v", err)
	}
	x, err := h.eng.Start(ctx, StartRequest{Workflow: ref, Name: name, TenantID: "tenant-1", Input: json.RawMessage(input)})
	if err != nil {
		tb.Fatalf("start: %v", err)
	}
	return x
}

// final waits for the execution's succeeded or failed event.
func (h *harness) final(tb testing.TB, name string) substate.EngineEvent {
	tb.Helper()
	return h.rec.WaitFor(tb, name, natstest.Status(substate.EngineSucceeded, substate.EngineFailed))
}

// output returns a finished execution's stored output.
func (h *harness) output(tb testing.TB, name string) map[string]any {
	tb.Helper()
	r, err := h.eng.db.execution(name)
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(r.Output, &out); err != nil {
		tb.Fatalf("output %s: %v", r.Output, err)
	}
	return out
}

// statuses lists "state:status" of an execution's events, in order.
func statuses(events []substate.EngineEvent, name string) string {
	var out []string
	for _, ev := range events {
		if ev.ExecutionID == name {
			out = append(out, ev.State+":"+ev.Status)
		}
	}
	return strings.Join(out, " ")
}

// echo is a task handler that replies with fields (and records requests).
func echo(fields map[string]any, seen chan<- micro.Request) micro.HandlerFunc {
	return func(req micro.Request) {
		if seen != nil {
			seen <- req
		}
		_ = req.RespondJSON(fields)
	}
}

// sleepers waits until n goroutines sleep on the clock.
func (h *harness) sleepers(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.clock.Sleepers() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("want %d sleepers, have %d; events %s", n, h.clock.Sleepers(), natstest.Summary(h.rec.Events()))
		}
		time.Sleep(time.Millisecond)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func mustJetStream(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
