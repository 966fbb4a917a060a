package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/state"
)

// process is "substate run" in a child process (this test binary
// re-executed, see TestMain), so it can be killed with a real signal.
type process struct {
	cmd           *exec.Cmd
	httpURL, nats string
}

func startProcess(tb testing.TB, dataDir, httpAddr, natsAddr string, extra ...string) *process {
	tb.Helper()
	args := []string{"-test.run=^$", "--", "run", "--data-dir", dataDir, "--http-addr", httpAddr, "--batch-size", "64", "--ack-wait", "2s"}
	if natsAddr != "" {
		args = append(args, "--nats-listen", natsAddr)
	}
	cmd := exec.Command(os.Args[0], append(args, extra...)...)
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	dieWithParent(cmd)
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
	p := &process{cmd: cmd, httpURL: "http://" + httpAddr, nats: "nats://" + natsAddr}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// A worker on a cluster that is still electing leaders retries its
	// start-up for up to 30 s.
	eventuallyWithin(tb, 45*time.Second, func() string {
		resp, err := http.Get(p.httpURL + "/readyz")
		if err != nil {
			return "worker not ready: " + err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("worker not ready: %d", resp.StatusCode)
		}
		return ""
	})
	return p
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

// restateRow is one webhook delivery of a Restate invocation status. The
// rows carry no retry_count, so the view infers retries from backing-off →
// running transitions: a redelivery applied twice would count one twice.
func restateRow(tenant string, step int) []byte {
	statuses := []string{"running", "backing-off", "running", "backing-off", "running", "completed"}
	row := map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": statuses[step],
		"created_at":  "2026-11-01T10:00:00Z",
		"modified_at": time.Date(2026, 11, 1, 10, 0, step, 0, time.UTC).Format(time.RFC3339Nano)}
	if statuses[step] == "backing-off" {
		row["last_failure"] = fmt.Sprintf("[503] attempt %d failed", step)
	}
	if statuses[step] == "completed" {
		row["completion_result"], row["completion_failure"] = "failure", "[500] gave up"
	}
	b, _ := json.Marshal(row)
	return b
}

var ingestClient = &http.Client{Timeout: 10 * time.Second}

// deliver posts a row until the worker acknowledges it, as Restate would.
func deliver(url string, tenant string, step int) error {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/ingest/restate", bytes.NewReader(restateRow(tenant, step)))
	req.Header.Set("webhook-id", fmt.Sprintf("%s-%d", tenant, step))
	resp, err := ingestClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// TestCrashRecovery kills the worker with SIGKILL in the middle of its
// batches, again and again; after the last restart the view equals the
// reference fold of the event stream, and the bbolt file is consistent.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := freePort(t), freePort(t)
	const tenants, steps = 40, 6
	next := make([]int, tenants) // the next step to deliver per tenant
	for round := 0; round < 4; round++ {
		p := startProcess(t, dir, httpAddr, natsAddr)
		// Deliver a slice of every tenant's history, then kill at once:
		// the normalizer and projector are mid-batch.
		for i := range tenants {
			for s := next[i]; s < min(steps, (round+1)*2); s++ {
				if err := deliver(p.httpURL, fmt.Sprintf("t%02d", i), s); err != nil {
					break // the row is delivered again after the restart
				}
				next[i] = s + 1
			}
		}
		if round < 3 {
			p.kill(t)
			continue
		}
		waitSettled(t, p.nats)
		p.terminate(t)
	}
	live := readView(t, filepath.Join(dir, "view.db"))
	want := referenceFold(t, dir)
	if len(live) != tenants || len(want) != tenants {
		t.Fatalf("live view has %d tenants, reference %d, want %d", len(live), len(want), tenants)
	}
	for id, w := range want {
		got := live[id]
		got.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
		if got != w {
			t.Errorf("tenant %s:\n live %+v\n want %+v", id, got, w)
		}
		// Two backing-off → running transitions happened; a redelivery
		// applied twice would make it more. (Fewer is possible: a row the
		// killed worker held comes back after later ones, and a late row is
		// stale, so its transition is not seen.)
		if got.WorkflowRetryCount > 2 {
			t.Errorf("tenant %s: retry count %d, more than the 2 retries that happened", id, got.WorkflowRetryCount)
		}
	}
	checkBolt(t, filepath.Join(dir, "view.db"))
}

// waitSettled waits until the normalizer and the projector have nothing
// pending and nothing unacknowledged.
func waitSettled(tb testing.TB, url string) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	eventually(tb, func() string {
		for _, c := range []struct{ stream, name string }{{substate.StreamRaw, bus.ConsumerNormalizer}, {substate.StreamEvents, bus.ProjectorConsumer("")}} {
			info := consumerState(tb, b.JetStream, c.stream, c.name)
			if info.NumPending != 0 || info.NumAckPending != 0 {
				return fmt.Sprintf("%s: %d pending, %d unacked", c.name, info.NumPending, info.NumAckPending)
			}
		}
		return ""
	})
}

func consumerState(tb testing.TB, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	tb.Helper()
	c, err := js.Consumer(context.Background(), stream, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// readView returns every tenant of a view file.
func readView(tb testing.TB, path string) map[string]substate.TenantView {
	tb.Helper()
	db := state.NewDB(path)
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	out := map[string]substate.TenantView{}
	f := substate.TenantFilter{Limit: 1000}
	for {
		page, err := db.Tenants(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, v := range page.Tenants {
			out[v.TenantID] = v
		}
		if page.NextPageToken == "" {
			return out
		}
		f.PageToken = page.NextPageToken
	}
}

// referenceFold applies the retained event stream of a stopped worker's
// embedded server in order, one event at a time, to a fresh view.
func referenceFold(tb testing.TB, dataDir string) map[string]substate.TenantView {
	tb.Helper()
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dataDir, "nats")})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	return foldStream(tb, b)
}

// referenceFoldURL folds the event stream of the NATS at url.
func referenceFoldURL(tb testing.TB, url string) map[string]substate.TenantView {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	return foldStream(tb, b)
}

func foldStream(tb testing.TB, b *bus.Bus) map[string]substate.TenantView {
	tb.Helper()
	ref := state.NewDB(filepath.Join(tb.TempDir(), "ref.db"))
	if err := ref.Open(); err != nil {
		tb.Fatal(err)
	}
	for _, m := range allMsgs(tb, b, substate.StreamEvents) {
		e, err := substate.UnmarshalEvent(m.Data)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := ref.Apply(context.Background(), []substate.Sequenced{{Seq: m.Sequence, Event: e.Data}}); err != nil {
			tb.Fatal(err)
		}
	}
	path := ref.Path
	ref.Close()
	return readView(tb, path)
}

// allMsgs returns every message of a stream in order.
func allMsgs(tb testing.TB, b *bus.Bus, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	ctx := context.Background()
	s, err := b.JetStream.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			if info, ierr := s.Info(ctx); ierr == nil && seq <= info.State.LastSeq {
				continue
			}
			return out
		} else if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m)
	}
}

// checkBolt runs bbolt's consistency check on a file.
func checkBolt(tb testing.TB, path string) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		tb.Fatalf("bbolt check: %v", err)
	}
}

// TestSIGTERMDrains stops a busy worker with SIGTERM: it exits 0 and leaves
// no message delivered but unacknowledged.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := freePort(t), freePort(t)
	p := startProcess(t, dir, httpAddr, natsAddr)
	for i := range 200 {
		if err := deliver(p.httpURL, fmt.Sprintf("t%03d", i), i%6); err != nil {
			t.Fatal(err)
		}
	}
	p.terminate(t)
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct{ stream, name string }{{substate.StreamRaw, bus.ConsumerNormalizer}, {substate.StreamEvents, bus.ProjectorConsumer("")}} {
		if info := consumerState(t, b.JetStream, c.stream, c.name); info.NumAckPending != 0 {
			t.Errorf("%s: %d messages delivered but not acknowledged after SIGTERM", c.name, info.NumAckPending)
		}
	}
	checkBolt(t, filepath.Join(dir, "view.db"))
}
