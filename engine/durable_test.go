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
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/natstest"
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

// Environment of the child processes TestKill starts.
const (
	envKillURL = "SUBSTATE_ENGINE_TEST_KILL_URL"
	envKillDB  = "SUBSTATE_ENGINE_TEST_KILL_DB"
	envKillNow = "SUBSTATE_ENGINE_TEST_KILL_NOW"
	envKillKey = "SUBSTATE_ENGINE_TEST_KILL_NKEY"
)

// TestKill runs the engine in child processes and kills each with SIGKILL:
// the first while a task attempt is in flight, the second while it backs
// off before a retry, the third while it is in a Wait state. Each child (and
// at last this process) resumes the execution from the store the killed one
// left. The children's clocks stand still, so they wait on their timers
// until they die; time moves only between them, as it would while a worker
// is down.
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
		case 1: // the first child's attempt: it dies before the reply
		case 2:
			_ = req.Error("Transient", "busy", nil)
		default:
			_ = req.RespondJSON(map[string]any{"done": true})
		}
	})
	db := filepath.Join(t.TempDir(), "engine.db")

	// Killed mid-attempt.
	child := startKillChild(t, h.ns.ClientURL(), db, epoch)
	if key := nextKey(t, keys); key != "kill1/1/work/1" {
		t.Fatalf("first child's key %q", key)
	}
	child.kill(t)

	// Killed mid-backoff: the resumed attempt repeats the killed one's key,
	// fails, and the child sleeps until a deadline its clock never reaches.
	child = startKillChild(t, h.ns.ClientURL(), db, epoch)
	if key := nextKey(t, keys); key != "kill1/1/work/1" {
		t.Errorf("resumed attempt key %q, want the killed attempt's", key)
	}
	backoff := waitStream(t, js, "kill1", substate.EngineBackingOff)
	if want := epoch.Add(30 * time.Second); !backoff.NextRetryAt.Equal(want) {
		t.Fatalf("next retry at %v, want %v", backoff.NextRetryAt, want)
	}
	child.kill(t)

	// Killed mid-wait: the backoff's deadline passed while no engine ran,
	// so the retry happens at once, then the Wait state starts.
	restart := epoch.Add(45 * time.Second)
	child = startKillChild(t, h.ns.ClientURL(), db, restart)
	if key := nextKey(t, keys); key != "kill1/1/work/2" {
		t.Errorf("retry key %q, want kill1/1/work/2", key)
	}
	waitStream(t, js, "kill1", substate.EngineWaiting)
	child.kill(t)

	// This process resumes the wait 100 s into its 600: it must end at the
	// deadline the killed child stored, not 600 s after the restart.
	h.path = db
	h.clock.Set(restart.Add(100 * time.Second))
	h.open(t)
	h.sleepers(t, 1)
	h.clock.Advance(500*time.Second - time.Millisecond)
	if n := h.clock.Sleepers(); n != 1 {
		t.Fatalf("the wait ended before its deadline (%d sleepers)", n)
	}
	h.clock.Advance(time.Millisecond)
	h.final(t, "kill1")

	want := "work:running work:error work:backing-off work:running pause:waiting done:succeeded"
	if got := statuses(js.Events(t), "kill1"); got != want {
		t.Errorf("stream events\n%s\nwant\n%s", got, want)
	}
	checkSeqs(t, js.Events(t), "kill1")
	if n := calls.Load(); n != 3 {
		t.Errorf("%d task requests, want 3", n)
	}
}

// killChild is an engine running in a child process (see TestKillChild).
type killChild struct{ cmd *exec.Cmd }

// startKillChild runs TestKillChild in a child process on db, with a
// clock that stands at now.
func startKillChild(t *testing.T, url, db string, now time.Time) *killChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$")
	cmd.Env = append(os.Environ(), envKillURL+"="+url, envKillDB+"="+db, envKillNow+"="+now.Format(time.RFC3339Nano),
		envKillKey+"="+natstest.Credentials(t, url).SeedFile(bus.Worker))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &killChild{cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// kill sends SIGKILL and waits until the child is gone.
func (c *killChild) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func nextKey(t *testing.T, keys <-chan string) string {
	t.Helper()
	select {
	case key := <-keys:
		return key
	case <-time.After(30 * time.Second):
		t.Fatal("no task request")
		return ""
	}
}

// waitStream waits until an event of execution with status is in the raw
// stream, where a child process published it.
func waitStream(t *testing.T, js *natstest.JetStream, execution, status string) substate.EngineEvent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		events := js.Events(t)
		for _, ev := range events {
			if ev.ExecutionID == execution && ev.Status == status {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event of %s in the stream; have %s", status, execution, natstest.Summary(events))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKillChild is a child process of TestKill: it opens the engine (which
// resumes what a killed child left), starts the execution (a no-op when it
// exists) and runs until it is killed.
func TestKillChild(t *testing.T) {
	url, db := os.Getenv(envKillURL), os.Getenv(envKillDB)
	if url == "" {
		t.Skip("runs only as TestKill's child process")
	}
	now, err := time.Parse(time.RFC3339Nano, os.Getenv(envKillNow))
	if err != nil {
		t.Fatal(err)
	}
	key, err := nats.NkeyOptionFromSeed(os.Getenv(envKillKey))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, key)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(db)
	e.Conn, e.Publisher = nc, &natstest.JetStream{JS: mustJetStream(t, nc)}
	e.Clock = NewManualClock(now)
	e.Jitter = func() float64 { return 0 }
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
