package consumers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/engine/stepfunctions"
	"github.com/substatehq/substate/internal/awstest"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/internal/pipelinetest"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
)

// fakeClock is an injected clock whose Sleep moves time forward instead of
// waiting, and remembers how long it was asked to sleep.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func newClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(max(d, 0))
	c.mu.Unlock()
	return ctx.Err()
}

// Slept returns the sleeps asked for so far and forgets them.
func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slept
	c.slept = nil
	return s
}

// pipeline is the part of the worker a reconciler feeds: an embedded NATS
// server with the streams, the normalizer, the projector and a bbolt view.
type pipeline struct {
	bus  *bus.Bus
	view *state.DB
	pub  *publishers.JetStream
}

func newPipeline(tb testing.TB) *pipeline {
	tb.Helper()
	b := newBus(tb)
	pipelinetest.RunNormalizer(tb, b, nil)
	view := pipelinetest.OpenView(tb)
	ctx := context.Background()
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("", 30*time.Second, 1), 0)
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	proj := &consumers.Projector{Consumer: c, Stream: stream, Store: view, DeadLetters: pub, Linger: time.Millisecond}
	pipelinetest.RunInBackground(tb, proj.Run)
	return &pipeline{bus: b, view: view, pub: pub}
}

// publish puts a raw event on SUBSTATE_RAW.
func (p *pipeline) publish(tb testing.TB, raw substate.RawEvent) {
	tb.Helper()
	if err := p.pub.PublishRaw(context.Background(), raw); err != nil {
		tb.Fatal(err)
	}
}

// settle waits until every raw message was normalized and every event
// applied to the view.
func (p *pipeline) settle(tb testing.TB) {
	tb.Helper()
	pipelinetest.WaitFor(tb, "the normalizer to settle", pipelinetest.Settled(tb, p.bus.JetStream, substate.StreamRaw, bus.ConsumerNormalizer))
	pipelinetest.WaitFor(tb, "the projector to settle", pipelinetest.Settled(tb, p.bus.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
}

// tenant returns a tenant's view.
func (p *pipeline) tenant(tb testing.TB, id string) substate.TenantView {
	tb.Helper()
	v, err := p.view.Tenant(context.Background(), id)
	if err != nil {
		tb.Fatalf("tenant %s: %v", id, err)
	}
	return v
}

// waitTenant waits until a tenant's view satisfies ok.
func (p *pipeline) waitTenant(tb testing.TB, id string, what string, ok func(substate.TenantView) bool) substate.TenantView {
	tb.Helper()
	var v substate.TenantView
	pipelinetest.WaitFor(tb, "tenant "+id+" "+what, func() bool {
		var err error
		v, err = p.view.Tenant(context.Background(), id)
		return err == nil && ok(v)
	})
	return v
}

// sfnFixture is the Step Functions execution of an EventBridge fixture.
type sfnFixture struct {
	ARN, MachineARN, Name, Input string
	StartDate                    time.Time
}

func readSFNFixture(tb testing.TB, name string) sfnFixture {
	tb.Helper()
	var ev struct {
		Detail struct {
			ExecutionArn, StateMachineArn, Name, Input string
			StartDate                                  int64
		}
	}
	if err := json.Unmarshal(fixtures.Provider(name), &ev); err != nil {
		tb.Fatal(err)
	}
	d := ev.Detail
	return sfnFixture{d.ExecutionArn, d.StateMachineArn, d.Name, d.Input, time.UnixMilli(d.StartDate).UTC()}
}

// addExecution stores the fixture's execution in the fake, running.
func addExecution(srv *awstest.Server, x sfnFixture) {
	srv.AddExecution(awstest.Execution{ARN: x.ARN, StateMachineARN: x.MachineARN, Name: x.Name, Status: "RUNNING",
		Input: x.Input, StartDate: x.StartDate})
}

// newSFN starts a fake Step Functions on the clock and a provider using it
// with the real SDK client.
func newSFN(tb testing.TB, clock *fakeClock) (*awstest.Server, *stepfunctions.Provider) {
	tb.Helper()
	srv := awstest.New(tb)
	srv.Now = clock.Now
	p := stepfunctions.New(sdkConfig(srv))
	p.Now = clock.Now
	return srv, p
}

// sdkConfig returns the SDK configuration for the local server.
func sdkConfig(srv *awstest.Server) aws.Config { return srv.Config() }

// newReconciler returns a reconciler on the clock asking p about Step
// Functions tenants.
func newReconciler(view substate.ActiveLister, sfn substate.StatusPoller, pub substate.RawPublisher, clock *fakeClock) *consumers.Reconciler {
	r := consumers.NewReconciler(view, map[substate.Provider]substate.StatusPoller{substate.ProviderStepFunctions: sfn}, pub)
	r.Now, r.Sleep = clock.Now, clock.Sleep
	return r
}

// logBuffer is a JSON slog handler's output, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Count returns how many log lines contain s.
func (l *logBuffer) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range bytes.Lines(l.b.Bytes()) {
		if bytes.Contains(line, []byte(s)) {
			n++
		}
	}
	return n
}

func (l *logBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Set moves the clock to t.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// newPublisher returns the JetStream publisher of a bus.
func newPublisher(b *bus.Bus) *publishers.JetStream { return publishers.NewJetStream(b.JetStream) }

// applyRunning applies, as the projector would, a running Step Functions
// event for the tenant's execution arn that occurred at the given time.
func applyRunning(tb testing.TB, view *state.DB, tenant, arn string, seq uint64, at time.Time) {
	tb.Helper()
	ev := substate.EventData{TenantID: tenant, Provider: substate.ProviderStepFunctions, ExecutionID: arn, Workflow: "orders",
		SubState: substate.StateRunning, ProviderState: "RUNNING", OccurredAt: at, ExecutionStartedAt: at,
		Revision: substate.StepFunctionsRevision(0, substate.RankActive, 0)}
	ev.Normalize()
	if _, err := view.Apply(context.Background(), []substate.Sequenced{{Seq: seq, Event: ev}}); err != nil {
		tb.Fatal(err)
	}
}

// counter returns the value of one counter of a vector.
func counter(tb testing.TB, v *prometheus.CounterVec, labels ...string) float64 {
	tb.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func fmtInts(s []int) string { return fmt.Sprint(s) }
