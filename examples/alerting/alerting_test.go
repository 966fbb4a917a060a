package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// substateBin is the substate binary the tests run, built by TestMain.
var substateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "alerting-test")
	if err != nil {
		panic(err)
	}
	substateBin = filepath.Join(dir, "substate")
	build := exec.Command("go", "build", "-o", substateBin, "github.com/substatehq/substate/cmd/substate")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build substate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestAlertingAsANewUser runs substate as a new user would, lets it
// project changes, then starts the example: a consumer of everything
// receives every change the worker projected before it started, in
// order, then the live ones; after a restart it goes on where it left
// off; the alerting consumer with the default filter sees only failures.
func TestAlertingAsANewUser(t *testing.T) {
	w := startSubstate(t)
	// Before any consumer exists: three tenants fail, two succeed, one runs.
	for i, end := range []string{"failed", "succeeded", "failed", "running", "succeeded", "failed"} {
		w.story(t, fmt.Sprintf("before-%d", i), end)
	}
	projected := w.waitFeed(t, 0)

	everything := Config{URL: w.natsURL, NkeyFile: w.subscriberKey, Durable: "everything", Filter: substate.SubjectChangesPrefix + ">"}
	all := startConsumer(t, everything)
	all.waitFor(t, projected)
	w.story(t, "live-0", "failed")
	w.story(t, "live-1", "succeeded")
	live := w.waitFeed(t, projected)
	all.waitFor(t, live)
	all.stop()
	checkSame(t, all.got(), w.feed(t))

	w.story(t, "after-restart", "failed")
	total := w.waitFeed(t, live)
	again := startConsumer(t, everything)
	again.waitFor(t, total-live)
	if got := again.got(); got[0].Seq <= all.got()[len(all.got())-1].Seq {
		t.Errorf("the restarted durable consumer delivered change %d again", got[0].Seq)
	}
	again.stop()

	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{URL: w.natsURL, NkeyFile: w.subscriberKey, Durable: "alerting", Filter: substate.SubjectChangesPrefix + "failed.>"}, &out)
	}()
	failures := 0
	for _, c := range w.feed(t) {
		if c.New.WorkflowSubState == substate.StateFailed {
			failures++
		}
	}
	eventually(t, func() string {
		if n := strings.Count(out.String(), "ALERT "); n != failures {
			return fmt.Sprintf("%d alerts, want %d", n, failures)
		}
		return ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != failures {
		t.Errorf("the failed filter delivered %d changes, want only the %d failures:\n%s", len(lines), failures, out.String())
	}
	if !strings.Contains(out.String(), "ALERT tenant before-0 failed") || !strings.Contains(out.String(), "): gave up") {
		t.Errorf("alerts:\n%s", out.String())
	}
}

// TestReplicasShareTheFeed runs two replicas of the service with the same
// durable consumer: neither is refused, and between them they receive
// every change once.
func TestReplicasShareTheFeed(t *testing.T) {
	w := startSubstate(t)
	for i, end := range []string{"failed", "succeeded", "running"} {
		w.story(t, fmt.Sprintf("tenant-%d", i), end)
	}
	n := w.waitFeed(t, 0)
	shared := Config{URL: w.natsURL, NkeyFile: w.subscriberKey, Durable: "shared", Filter: substate.SubjectChangesPrefix + ">"}
	a, b := startConsumer(t, shared), startConsumer(t, shared)
	eventually(t, func() string {
		if got := len(a.got()) + len(b.got()); got != n {
			return fmt.Sprintf("replicas received %d changes, want %d", got, n)
		}
		return ""
	})
	a.stop()
	b.stop()
	seen := map[uint64]bool{}
	for _, c := range append(a.got(), b.got()...) {
		if seen[c.Seq] {
			t.Errorf("change %d delivered to both replicas", c.Seq)
		}
		seen[c.Seq] = true
	}
	for _, c := range w.feed(t) {
		if !seen[c.Seq] {
			t.Errorf("change %d delivered to neither replica", c.Seq)
		}
	}
}

// checkSame checks that a consumer received exactly the feed, in order.
func checkSame(tb testing.TB, got, feed []substate.Change) {
	tb.Helper()
	if len(got) != len(feed) {
		tb.Fatalf("received %d changes, the feed holds %d", len(got), len(feed))
	}
	for i := range feed {
		if got[i].Seq != feed[i].Seq || got[i].New.WorkflowSubState != feed[i].New.WorkflowSubState {
			tb.Errorf("change %d: received seq %d (%s), the feed has seq %d (%s)", i, got[i].Seq, got[i].New.WorkflowSubState, feed[i].Seq, feed[i].New.WorkflowSubState)
		}
	}
}

// consumer is the example's Consume running in the background.
type consumer struct {
	mu      sync.Mutex
	changes []substate.Change
	cancel  context.CancelFunc
	done    chan error
	tb      testing.TB
}

func startConsumer(tb testing.TB, c Config) *consumer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &consumer{cancel: cancel, done: make(chan error, 1), tb: tb}
	go func() {
		r.done <- Consume(ctx, c, func(ch substate.Change, _ cloudevents.Event) {
			r.mu.Lock()
			r.changes = append(r.changes, ch)
			r.mu.Unlock()
		})
	}()
	tb.Cleanup(r.stop)
	return r
}

func (r *consumer) got() []substate.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]substate.Change(nil), r.changes...)
}

func (r *consumer) waitFor(tb testing.TB, n int) {
	tb.Helper()
	eventually(tb, func() string {
		select {
		case err := <-r.done:
			tb.Fatalf("consumer stopped: %v", err)
		default:
		}
		if got := len(r.got()); got != n {
			return fmt.Sprintf("consumer received %d changes, want %d", got, n)
		}
		return ""
	})
}

func (r *consumer) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		r.tb.Errorf("consumer: %v", err)
	}
	r.cancel = nil
}

// worker is a substate run process.
type worker struct {
	httpURL, natsURL, subscriberKey string
}

// startSubstate runs substate as the README says, granting the subscriber
// identity the consumer names the tests' services use.
func startSubstate(tb testing.TB) *worker {
	tb.Helper()
	dir := tb.TempDir()
	httpAddr, natsAddr := freeAddr(tb), freeAddr(tb)
	cmd := exec.Command(substateBin, "run", "--data-dir", dir, "--http-addr", httpAddr, "--nats-listen", natsAddr, "--log-level", "warn",
		"--subscriber-consumers", "alerting,everything,shared")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("substate log:\n%s", logs.String())
		}
	})
	w := &worker{httpURL: "http://" + httpAddr, natsURL: "nats://" + natsAddr,
		subscriberKey: filepath.Join(dir, "nats", "credentials", "subscriber.nk")}
	eventually(tb, func() string {
		resp, err := http.Get(w.httpURL + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("readyz %d", resp.StatusCode)
		}
		return ""
	})
	return w
}

// story posts a tenant's Restate invocation from running through a retry
// to its end: failed, succeeded or still running.
func (w *worker) story(tb testing.TB, tenant, end string) {
	tb.Helper()
	statuses := []string{"running", "backing-off", "running"}
	if end != "running" {
		statuses = append(statuses, "completed")
	}
	for step, status := range statuses {
		row := map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": status,
			"created_at":  "2026-11-01T10:00:00Z",
			"modified_at": time.Date(2026, 11, 1, 10, 0, step, 0, time.UTC).Format(time.RFC3339Nano)}
		if status == "backing-off" {
			row["last_failure"] = "[503] quota"
		}
		if status == "completed" && end == "failed" {
			row["completion_result"], row["completion_failure"] = "failure", "[500] gave up"
		} else if status == "completed" {
			row["completion_result"] = "success"
		}
		body, _ := json.Marshal(row)
		req, _ := http.NewRequest(http.MethodPost, w.httpURL+"/v1/ingest/restate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", fmt.Sprintf("%s-%d", tenant, step))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			tb.Fatalf("ingest %s step %d: %d", tenant, step, resp.StatusCode)
		}
	}
}

// waitFeed waits until the change feed holds more than after changes and
// stops growing, and returns how many it holds.
func (w *worker) waitFeed(tb testing.TB, after int) int {
	tb.Helper()
	last, stable := -1, 0
	eventually(tb, func() string {
		n := len(w.feed(tb))
		if n == last && n > after {
			if stable++; stable >= 3 {
				return ""
			}
		} else {
			stable = 0
		}
		last = n
		time.Sleep(200 * time.Millisecond)
		return fmt.Sprintf("feed holds %d changes", n)
	})
	return last
}

// feed reads every change of SUBSTATE_CHANGES as the subscriber identity,
// by sequence with direct gets: a read that needs no consumer.
func (w *worker) feed(tb testing.TB) []substate.Change {
	tb.Helper()
	key, err := nats.NkeyOptionFromSeed(w.subscriberKey)
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := nats.Connect(w.natsURL, key, nats.CustomInboxPrefix("_INBOX_subscriber"))
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, substate.StreamChanges)
	if err != nil {
		tb.Fatal(err)
	}
	var out []substate.Change
	for seq := s.CachedInfo().State.FirstSeq; seq > 0 && seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatal(err)
		}
		e, err := substate.UnmarshalChangeEvent(m.Data)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, e.Data)
	}
	return out
}

// eventually, freeAddr and syncBuffer repeat helpers of substate's own
// tests on purpose: the example builds on substate's public packages
// alone, as a service outside this repository would, so it cannot share
// a helper under internal/.

// eventually runs fn until it returns "" or a minute passes.
func eventually(tb testing.TB, fn func() string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		msg := fn()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe to read while the binary writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
