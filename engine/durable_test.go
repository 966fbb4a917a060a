package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine/internal/natstest"
)

const resumeWorkflow = `
name: resuming
version: "1"
startAt: work
states:
  work:
    type: Task
    resource: svc.work
    next: pause
    retry:
      maxAttempts: 3
      initialDelaySeconds: 30
  pause:
    type: Wait
    seconds: 600
    next: done
  done:
    type: Success
`

// TestResume closes the engine mid-backoff and mid-wait, moves time on while
// it is down, and checks that a new engine finishes the execution with one
// event per transition in JetStream.
func TestResume(t *testing.T) {
	h := newHarness(t)
	js := natstest.RawStream(t, h.nc)
	h.rec.Forward = js
	var calls atomic.Int32
	natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
		if calls.Add(1) == 1 {
			_ = req.Error("Transient", "busy", nil)
			return
		}
		_ = req.RespondJSON(map[string]any{"done": true})
	})
	h.start(t, resumeWorkflow, "res1", `{}`)
	h.rec.WaitFor(t, "res1", natstest.Status(substate.EngineBackingOff))

	_ = h.eng.Close() // mid-backoff
	h.clock.Advance(30 * time.Second)
	h.open(t)
	h.rec.WaitFor(t, "res1", natstest.Status(substate.EngineWaiting))

	_ = h.eng.Close() // mid-wait
	h.clock.Advance(time.Hour)
	h.open(t) // the deadline passed while it was down: fires at once
	h.final(t, "res1")

	want := "work:running work:error work:backing-off work:running pause:waiting done:succeeded"
	if got := statuses(js.Events(t), "res1"); got != want {
		t.Errorf("stream events\n%s\nwant\n%s", got, want)
	}
	checkSeqs(t, js.Events(t), "res1")
}

// TestResumeMidAttempt closes the engine while a task attempt is in flight:
// the new engine repeats the attempt with the same idempotency key.
func TestResumeMidAttempt(t *testing.T) {
	h := newHarness(t)
	keys := make(chan string, 4)
	var calls atomic.Int32
	natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
		keys <- req.Headers().Get(substate.HeaderIdempotencyKey)
		if calls.Add(1) == 1 {
			return // never replies: the engine closes meanwhile
		}
		_ = req.RespondJSON(map[string]any{})
	})
	h.start(t, resumeWorkflow, "res2", `{}`)
	first := <-keys
	_ = h.eng.Close()
	h.open(t)
	if second := <-keys; second != first || first != "res2/1/work/1" {
		t.Errorf("keys %q then %q, want the same attempt key twice", first, second)
	}
	h.rec.WaitFor(t, "res2", natstest.Status(substate.EngineWaiting))
	h.clock.Advance(10 * time.Minute)
	h.final(t, "res2")
	if got, want := statuses(h.rec.Events(), "res2"), "work:running pause:waiting done:succeeded"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// Environment of the child process TestKill starts.
const (
	envKillURL = "SUBSTATE_ENGINE_TEST_KILL_URL"
	envKillDB  = "SUBSTATE_ENGINE_TEST_KILL_DB"
)

// TestKill runs an engine in a child process, kills it with SIGKILL while a
// task attempt is in flight, and resumes the execution in this process.
func TestKill(t *testing.T) {
	h := newHarness(t)
	js := natstest.RawStream(t, h.nc)
	h.rec.Forward = js
	_ = h.eng.Close()
	keys := make(chan string, 4)
	var calls atomic.Int32
	natstest.Service(t, h.nc, "svc", "work", func(req micro.Request) {
		keys <- req.Headers().Get(substate.HeaderIdempotencyKey)
		switch calls.Add(1) {
		case 1: // the child's attempt: it dies before the reply
		case 2:
			_ = req.Error("Transient", "busy", nil)
		default:
			_ = req.RespondJSON(map[string]any{"done": true})
		}
	})
	db := filepath.Join(t.TempDir(), "engine.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$")
	cmd.Env = append(os.Environ(), envKillURL+"="+h.ns.ClientURL(), envKillDB+"="+db)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case key := <-keys:
		if key != "kill1/1/work/1" {
			t.Fatalf("child's key %q", key)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("child made no task request")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()

	h.path = db
	h.clock.Set(time.Now())
	h.open(t)
	if key := <-keys; key != "kill1/1/work/1" {
		t.Errorf("resumed attempt key %q, want the killed attempt's", key)
	}
	ev := h.rec.WaitFor(t, "kill1", natstest.Status(substate.EngineBackingOff))
	h.clock.Set(ev.NextRetryAt)
	h.rec.WaitFor(t, "kill1", natstest.Status(substate.EngineWaiting))
	h.clock.Advance(10 * time.Minute)
	h.final(t, "kill1")
	want := "work:running work:error work:backing-off work:running pause:waiting done:succeeded"
	if got := statuses(js.Events(t), "kill1"); got != want {
		t.Errorf("stream events\n%s\nwant\n%s", got, want)
	}
	checkSeqs(t, js.Events(t), "kill1")
}

// TestKillChild is the child process of TestKill: it starts the execution
// and runs until it is killed.
func TestKillChild(t *testing.T) {
	url, db := os.Getenv(envKillURL), os.Getenv(envKillDB)
	if url == "" {
		t.Skip("runs only as TestKill's child process")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(db)
	e.Conn, e.Publisher = nc, &natstest.JetStream{JS: mustJetStream(t, nc)}
	e.Logger = slog.New(slog.DiscardHandler)
	e.ServeControl = false
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref, err := e.EnsureWorkflow(ctx, Workflow{Definition: []byte(resumeWorkflow)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, StartRequest{Workflow: ref, Name: "kill1", TenantID: "t", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "child was not killed")
	os.Exit(1)
}
