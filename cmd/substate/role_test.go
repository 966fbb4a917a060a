package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/worker"
)

// get returns the status and body of a GET.
func get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRoleSplit runs an ingest worker and a project worker on one NATS, as
// a Deployment and a StatefulSet do: events posted to the first reach the
// view of the second, and neither serves what its role leaves out.
func TestRoleSplit(t *testing.T) {
	ingestDir := t.TempDir()
	in := startWorker(t, ingestDir, "--role", "ingest")
	if in.View != nil || in.Projector != nil || in.Engine != nil {
		t.Fatal("the ingest role opened a view, a projector or the engine")
	}
	if views, _ := filepath.Glob(filepath.Join(ingestDir, "view*.db")); len(views) > 0 {
		t.Fatalf("the ingest role created %v", views)
	}
	pr := startWorker(t, t.TempDir(), "--role", "project", "--instance", "replica-a", "--nats-url", in.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, in.Bus, bus.Worker))
	if pr.Normalizer != nil {
		t.Fatal("the project role started a normalizer")
	}
	nc := bustest.Connect(t, in.Bus, bus.Subscriber)
	changes, err := nc.SubscribeSync("substate.changes.>")
	if err != nil {
		t.Fatal(err)
	}

	example := examplePath("stepfunctions-failed.json")
	if code := postFile(t, pr.HTTP.URL()+"/v1/ingest/eventbridge", example, nil); code != http.StatusNotFound {
		t.Fatalf("ingest on the project role: %d, want 404", code)
	}
	if code, body := get(t, in.HTTP.URL()+"/v1/tenants/acme"); code != http.StatusNotFound || !strings.Contains(body, "no route") {
		t.Fatalf("query on the ingest role: %d %s, want 404 no route", code, body)
	}
	if code := postFile(t, in.HTTP.URL()+"/v1/ingest/eventbridge", example, nil); code != http.StatusAccepted {
		t.Fatalf("ingest on the ingest role: %d, want 202", code)
	}
	eventually(t, func() string {
		code, out, errOut := runCLI(t, "tenants", "get", "acme", "--server", pr.HTTP.URL(), "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) {
			return fmt.Sprintf("tenants get on the project role: %d %s %s", code, out, errOut)
		}
		return ""
	})
	if _, err := changes.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("change feed: %v", err)
	}
	for _, w := range []*testWorker{in, pr} {
		if code, body := get(t, w.HTTP.URL()+"/readyz"); code != http.StatusOK {
			t.Errorf("%s role not ready: %d %s", w.Flags.Role, code, body)
		}
	}
}

// TestEngineRole runs the built-in engine in a process of its own, as the
// engine StatefulSet does: an execution started over NATS reaches the view
// of a projector through a separate ingest process.
func TestEngineRole(t *testing.T) {
	in := startWorker(t, t.TempDir(), "--role", "ingest")
	en := startWorker(t, t.TempDir(), "--role", "engine", "--nats-url", in.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, in.Bus, bus.Worker))
	if en.Engine == nil || en.View != nil || en.Normalizer != nil || en.Projector != nil {
		t.Fatal("the engine role must run the engine and nothing else")
	}
	pr := startWorker(t, t.TempDir(), "--role", "project", "--instance", "replica-a", "--nats-url", in.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, in.Bus, bus.Worker))
	file := orderWorkflow(t, in.Bus.Conn)
	s := demo.Scenarios[1] // backorder: fails without retries
	code, out, errOut := runCLI(t, "workflow", "start", file, "--tenant", s.TenantID, "--input", string(s.Input), "--name", s.Name, "--nats-url", in.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, in.Bus, bus.Worker))
	if code != 0 || !strings.Contains(out, "started "+s.Name) {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	eventually(t, func() string {
		code, out, _ := runCLI(t, "tenants", "get", s.TenantID, "--server", pr.HTTP.URL(), "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) {
			return fmt.Sprintf("tenant %s on the projector: %s", s.TenantID, out)
		}
		return ""
	})
	if code, body := get(t, en.HTTP.URL()+"/readyz"); code != http.StatusOK {
		t.Errorf("engine role not ready: %d %s", code, body)
	}
}

func TestNoChangeFeed(t *testing.T) {
	w := startWorker(t, t.TempDir(), "--no-change-feed")
	if w.Changes != nil || w.View.ChangeOutbox {
		t.Fatal("--no-change-feed left the change feed on")
	}
	if w = startWorker(t, t.TempDir()); w.Changes == nil || !w.View.ChangeOutbox {
		t.Fatal("the change feed is off by default")
	}
}

// TestProjectorReadyAfterCatchUp opens a projector replica on a stream that
// already holds events: it is not ready until its view has caught up.
func TestProjectorReadyAfterCatchUp(t *testing.T) {
	in := startWorker(t, t.TempDir(), "--role", "ingest")
	body, err := os.ReadFile(examplePath("stepfunctions-failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	const events = 5
	for i := range events {
		b := bytes.Replace(body, []byte("3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51"), fmt.Appendf(nil, "catch-up-%d", i), 1)
		if code := postBytes(t, in.HTTP.URL()+"/v1/ingest/eventbridge", b, nil); code != http.StatusAccepted {
			t.Fatalf("ingest %d: %d", i, code)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eventually(t, func() string {
		s, err := in.Bus.JetStream.Stream(ctx, substate.StreamEvents)
		if err != nil || s.CachedInfo().State.Msgs < events {
			return fmt.Sprintf("normalized events: %v", err)
		}
		return ""
	})

	cli, err := parseCLI([]string{"run", "--role", "project", "--batch-size", "1", "--nats-url", in.Bus.ClientURL(), "--nats-nkey", bustest.Seed(t, in.Bus, bus.Worker),
		"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--log-level", "warn"})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(cli.Run.Flags)
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "catching up") {
		t.Fatalf("ready before the projector ran: %v, want catching up", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, func() string {
		if err := w.Ready(); err != nil {
			return err.Error()
		}
		return ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
