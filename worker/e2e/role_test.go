package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestRoleSplit runs an ingest worker and a project worker on one NATS, as
// a Deployment and a StatefulSet do: events posted to the first reach the
// view of the second, and neither serves what its role leaves out.
func TestRoleSplit(t *testing.T) {
	ingestDir := t.TempDir()
	in := workertest.Start(t, workertest.DataDir(ingestDir), role(worker.RoleIngest))
	if in.View != nil || in.Projector != nil || in.Engine != nil {
		t.Fatal("the ingest role opened a view, a projector or the engine")
	}
	if views, _ := filepath.Glob(filepath.Join(ingestDir, "view*.db")); len(views) > 0 {
		t.Fatalf("the ingest role created %v", views)
	}
	pr := workertest.Start(t, role(worker.RoleProject), on(t, in), func(f *worker.Flags) { f.Instance = "replica-a" })
	if pr.Normalizer != nil {
		t.Fatal("the project role started a normalizer")
	}
	nc := bustest.Connect(t, in.Bus, bus.Subscriber)
	changes, err := nc.SubscribeSync("substate.changes.>")
	if err != nil {
		t.Fatal(err)
	}

	example := workertest.ExamplePath(t, "stepfunctions-failed.json")
	if code := workertest.PostFile(t, pr.HTTP.URL()+"/v1/ingest/eventbridge", example, nil); code != http.StatusNotFound {
		t.Fatalf("ingest on the project role: %d, want 404", code)
	}
	if code, body := workertest.Get(t, in.HTTP.URL()+"/v1/tenants/acme"); code != http.StatusNotFound || !strings.Contains(body, "no route") {
		t.Fatalf("query on the ingest role: %d %s, want 404 no route", code, body)
	}
	if code := workertest.PostFile(t, in.HTTP.URL()+"/v1/ingest/eventbridge", example, nil); code != http.StatusAccepted {
		t.Fatalf("ingest on the ingest role: %d, want 202", code)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, pr.HTTP.URL()+"/v1/tenants/acme", &v); code != http.StatusOK || v.WorkflowSubState != substate.StateFailed {
			return fmt.Sprintf("acme on the project role: %d %+v", code, v)
		}
		return ""
	})
	if _, err := changes.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("change feed: %v", err)
	}
	for _, w := range []*workertest.Worker{in, pr} {
		if code, body := workertest.Get(t, w.HTTP.URL()+"/readyz"); code != http.StatusOK {
			t.Errorf("%s role not ready: %d %s", w.Flags.Role, code, body)
		}
	}
}

// TestEngineRole runs the built-in engine in a process of its own, as the
// engine StatefulSet does: an execution started over NATS reaches the view
// of a projector through a separate ingest process.
func TestEngineRole(t *testing.T) {
	in := workertest.Start(t, role(worker.RoleIngest))
	en := workertest.Start(t, role(worker.RoleEngine), on(t, in))
	if en.Engine == nil || en.View != nil || en.Normalizer != nil || en.Projector != nil {
		t.Fatal("the engine role must run the engine and nothing else")
	}
	pr := workertest.Start(t, role(worker.RoleProject), on(t, in), func(f *worker.Flags) { f.Instance = "replica-a" })
	svc, err := demo.Register(in.Bus.Conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	s := demo.Scenarios[1] // backorder: fails without retries
	x, err := engine.RequestStart(context.Background(), bustest.Connect(t, in.Bus, bus.Worker), engine.StartCommand{
		Definition: string(demo.Workflow), Name: s.Name, TenantID: s.TenantID, Input: s.Input,
	})
	if err != nil || x.ID != s.Name || x.Existing {
		t.Fatalf("start: %+v %v, want %s started", x, err, s.Name)
	}
	workertest.Eventually(t, func() string {
		var v substate.TenantView
		if code := workertest.GetJSON(t, pr.HTTP.URL()+"/v1/tenants/"+s.TenantID, &v); code != http.StatusOK || v.WorkflowSubState != substate.StateFailed {
			return fmt.Sprintf("tenant %s on the projector: %d %+v", s.TenantID, code, v)
		}
		return ""
	})
	if code, body := workertest.Get(t, en.HTTP.URL()+"/readyz"); code != http.StatusOK {
		t.Errorf("engine role not ready: %d %s", code, body)
	}
}

func TestNoChangeFeed(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.ChangeFeed = false })
	if w.Changes != nil || w.View.ChangeOutbox {
		t.Fatal("--no-change-feed left the change feed on")
	}
	if w = workertest.Start(t); w.Changes == nil || !w.View.ChangeOutbox {
		t.Fatal("the change feed is off by default")
	}
}

// TestProjectorReadyAfterCatchUp opens a projector replica on a stream that
// already holds events: it is not ready until its view has caught up.
func TestProjectorReadyAfterCatchUp(t *testing.T) {
	in := workertest.Start(t, role(worker.RoleIngest))
	body := workertest.Example(t, "stepfunctions-failed.json")
	const events = 5
	for i := range events {
		b := bytes.Replace(body, []byte("3f1c1a52-5a8e-4f0e-9b7a-0c1d2e3f4a51"), fmt.Appendf(nil, "catch-up-%d", i), 1)
		if code := workertest.Post(t, in.HTTP.URL()+"/v1/ingest/eventbridge", b, nil); code != http.StatusAccepted {
			t.Fatalf("ingest %d: %d", i, code)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workertest.Eventually(t, func() string {
		s, err := in.Bus.JetStream.Stream(ctx, substate.StreamEvents)
		if err != nil || s.CachedInfo().State.Msgs < events {
			return fmt.Sprintf("normalized events: %v", err)
		}
		return ""
	})

	w := workertest.Open(t, workertest.Flags(t, role(worker.RoleProject), on(t, in), func(f *worker.Flags) { f.BatchSize = 1 }))
	if err := w.Ready(); err == nil || !strings.Contains(err.Error(), "catching up") {
		t.Fatalf("ready before the projector ran: %v, want catching up", err)
	}
	w.Run()
	w.WaitReady(t)
	w.Stop(t)
	if err := w.Err(); err != nil {
		t.Fatalf("the projector stopped with %v, want nil", err)
	}
}

// role is an edit that runs only a part of the worker (--role).
func role(r string) func(*worker.Flags) {
	return func(f *worker.Flags) { f.Role = r }
}

// on is an edit that puts the worker on the NATS of another (--nats-url,
// --nats-nkey), as the Deployment and StatefulSets of one release share it.
func on(tb testing.TB, other *workertest.Worker) func(*worker.Flags) {
	url, seed := other.Bus.ClientURL(), bustest.Seed(tb, other.Bus, bus.Worker)
	return func(f *worker.Flags) { f.NATSURL, f.NATSNkey = url, seed }
}
