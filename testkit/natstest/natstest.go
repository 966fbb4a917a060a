// Package natstest starts the real dependencies the engine's tests need: an
// embedded NATS server with JetStream on a random port, a connection, the
// raw stream, and publishers that record what the engine emits.
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// servers holds the credentials of every server Server started, by client
// URL.
var servers sync.Map

// Server starts an embedded NATS server with JetStream and substate's
// identities (bus.Credentials, with bus.Permissions), so the engine runs
// with the worker's permissions and task services with the task services'
// ones. It is stopped on cleanup.
func Server(tb testing.TB) *server.Server {
	tb.Helper()
	creds, err := bus.EnsureCredentials(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	users, err := bus.Users(creds, bus.Consumers{Worker: bus.WorkerConsumers()})
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(), NoLog: true, NoSigs: true, Nkeys: users,
	})
	if err != nil {
		tb.Fatalf("new nats server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	servers.Store(ns.ClientURL(), creds)
	tb.Cleanup(func() {
		servers.Delete(ns.ClientURL())
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// Credentials returns the identities of the server Server started at url.
func Credentials(tb testing.TB, url string) bus.Credentials {
	tb.Helper()
	creds, ok := servers.Load(url)
	if !ok {
		tb.Fatalf("natstest: no server of this test listens at %s", url)
	}
	return creds.(bus.Credentials)
}

// Conn connects to ns as the worker, closed on cleanup.
func Conn(tb testing.TB, ns *server.Server) *nats.Conn {
	tb.Helper()
	return ConnAs(tb, ns.ClientURL(), bus.Worker)
}

// ConnAs connects to the server at url as id, closed on cleanup.
func ConnAs(tb testing.TB, url string, id bus.Identity) *nats.Conn {
	tb.Helper()
	opts, err := Credentials(tb, url).Options(id)
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatalf("connect as %s: %v", id, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Service registers a micro service that answers one task resource with h,
// on a connection of its own as a task service to the server nc is
// connected to; it is stopped on cleanup.
func Service(tb testing.TB, nc *nats.Conn, service, operation string, h micro.HandlerFunc) micro.Service {
	tb.Helper()
	tasks := ConnAs(tb, nc.ConnectedUrl(), bus.Tasks)
	svc, err := micro.AddService(tasks, micro.Config{Name: "task-" + service, Version: "1.0.0"})
	if err != nil {
		tb.Fatalf("add service: %v", err)
	}
	if err := svc.AddEndpoint(operation, h, micro.WithEndpointSubject(substate.TaskSubject(service, operation))); err != nil {
		tb.Fatalf("add endpoint: %v", err)
	}
	if err := tasks.Flush(); err != nil { // the server has the subscription before the engine asks
		tb.Fatalf("flush: %v", err)
	}
	tb.Cleanup(func() { _ = svc.Stop() })
	return svc
}

// JetStream publishes raw events to the SUBSTATE_RAW stream with their id
// as Nats-Msg-Id, as the real publisher does.
type JetStream struct {
	JS jetstream.JetStream
}

// RawStream creates SUBSTATE_RAW on nc and returns a publisher to it.
func RawStream(tb testing.TB, nc *nats.Conn) *JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream: %v", err)
	}
	_, err = js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: substate.StreamRaw, Subjects: []string{substate.SubjectRawPrefix + ">"}, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		tb.Fatalf("create stream: %v", err)
	}
	return &JetStream{JS: js}
}

// PublishRaw publishes ev and waits for JetStream's acknowledgement.
func (p *JetStream) PublishRaw(ctx context.Context, ev substate.RawEvent) error {
	_, err := p.JS.Publish(ctx, substate.RawSubject(ev.Kind), ev.Body, jetstream.WithMsgID(ev.ID))
	return err
}

// Events reads every engine event stored in the raw stream, in order.
func (p *JetStream) Events(tb testing.TB) []substate.EngineEvent {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.JS.Stream(ctx, substate.StreamRaw)
	if err != nil {
		tb.Fatalf("stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatalf("stream info: %v", err)
	}
	var out []substate.EngineEvent
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatalf("get msg %d: %v", seq, err)
		}
		var ev substate.EngineEvent
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			tb.Fatalf("decode event: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// Recorder is a RawPublisher that keeps every engine event it is given.
// Fail, when set, can refuse an event (the engine must then retry it);
// Forward, when set, publishes the event on before it is recorded.
type Recorder struct {
	Fail    func(ev substate.EngineEvent) error
	Forward substate.RawPublisher

	mu     sync.Mutex
	events []substate.EngineEvent
	notify chan struct{}
}

// PublishRaw decodes and records ev.
func (r *Recorder) PublishRaw(ctx context.Context, raw substate.RawEvent) error {
	var ev substate.EngineEvent
	if err := json.Unmarshal(raw.Body, &ev); err != nil {
		return err
	}
	if raw.Kind != substate.RawEngine || raw.ID != ev.ID {
		return fmt.Errorf("raw event %q of kind %q does not match its body id %q", raw.ID, raw.Kind, ev.ID)
	}
	if r.Fail != nil {
		if err := r.Fail(ev); err != nil {
			return err
		}
	}
	if r.Forward != nil {
		if err := r.Forward.PublishRaw(ctx, raw); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
	return nil
}

// Events returns a copy of the recorded events.
func (r *Recorder) Events() []substate.EngineEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]substate.EngineEvent(nil), r.events...)
}

// WaitFor waits until an event of execution matches ok, and returns it.
func (r *Recorder) WaitFor(tb testing.TB, execution string, ok func(substate.EngineEvent) bool) substate.EngineEvent {
	tb.Helper()
	deadline := time.After(15 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.ExecutionID == execution && ok(ev) {
				r.mu.Unlock()
				return ev
			}
		}
		if r.notify == nil {
			r.notify = make(chan struct{})
		}
		ch := r.notify
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			tb.Fatalf("execution %s: no matching event; have %s", execution, Summary(r.Events()))
		}
	}
}

// Status matches events with one of the given statuses.
func Status(statuses ...string) func(substate.EngineEvent) bool {
	return func(ev substate.EngineEvent) bool {
		for _, s := range statuses {
			if ev.Status == s {
				return true
			}
		}
		return false
	}
}

// Summary renders events as "state:status" for failure messages.
func Summary(events []substate.EngineEvent) string {
	s := ""
	for _, ev := range events {
		s += fmt.Sprintf("[%s %d %s:%s a%d r%d %s]", ev.ExecutionID, ev.Seq, ev.State, ev.Status, ev.Attempt, ev.RetryCount, ev.ErrorType)
	}
	return s
}
