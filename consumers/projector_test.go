package consumers_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// runProjector runs a projector on b into view until the test ends.
func runProjector(tb testing.TB, b *bus.Bus, view *state.DB, cfg jetstream.ConsumerConfig) {
	tb.Helper()
	runProjectorWith(tb, b, view, cfg, publishers.NewJetStream(b.JetStream))
}

// runProjectorWith runs a projector that dead-letters through dlq, and
// the change feed of its view.
func runProjectorWith(tb testing.TB, b *bus.Bus, view *state.DB, cfg jetstream.ConsumerConfig, dlq substate.DeadLetterPublisher) {
	tb.Helper()
	p := newProjector(tb, b, view, cfg)
	p.DeadLetters = dlq
	view.ChangeOutbox = true // the change feed as the worker runs it
	pipelinetest.RunInBackground(tb, (&publishers.ChangeFeed{JetStream: b.JetStream, Outbox: view}).Run)
	pipelinetest.RunInBackground(tb, p.Run)
}

// newProjector returns a projector of SUBSTATE_EVENTS into view from the
// view's checkpoint on, with the stream it fills gaps from and a 1 ms
// linger, dead-lettering on b; the caller runs it.
func newProjector(tb testing.TB, b *bus.Bus, view *state.DB, cfg jetstream.ConsumerConfig) *consumers.Projector {
	tb.Helper()
	ctx := context.Background()
	cp, err := view.Checkpoint(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, cfg, cp)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	return &consumers.Projector{Consumer: c, Stream: s, Store: view, DeadLetters: publishers.NewJetStream(b.JetStream), Linger: time.Millisecond}
}

func projectorConfig() jetstream.ConsumerConfig {
	return bus.ProjectorConsumerConfig("", 30*time.Second, 1)
}

// sfn builds a Step Functions canonical event of an execution.
func sfn(tenant, exec string, s substate.SubState, redrive, rank int, started time.Time, errMsg string) substate.Event {
	d := substate.EventData{TenantID: tenant, Provider: substate.ProviderStepFunctions, ExecutionID: exec, Workflow: "provision",
		SubState: s, ProviderState: string(s), ErrorMessage: errMsg, ExecutionStartedAt: started,
		OccurredAt: started.Add(time.Duration(redrive*10+rank) * time.Second), Revision: mapping.StepFunctionsRevision(redrive, rank, 0)}
	d.Normalize()
	return substate.NewEvent(fmt.Sprintf("%s/%s/%d/%d", exec, s, redrive, rank), d)
}

// changeCounter counts change-feed messages per tenant.
type changeCounter struct {
	mu      sync.Mutex
	changes []substate.Change
}

func countChanges(tb testing.TB, nc *nats.Conn) *changeCounter {
	tb.Helper()
	cc := &changeCounter{}
	sub, err := nc.Subscribe(substate.SubjectChangesPrefix+">", func(m *nats.Msg) {
		e, err := substate.UnmarshalChangeEvent(m.Data)
		if err != nil {
			tb.Errorf("change feed message: %v", err)
		}
		c := e.Data
		cc.mu.Lock()
		cc.changes = append(cc.changes, c)
		cc.mu.Unlock()
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sub.Unsubscribe() })
	return cc
}

func (cc *changeCounter) len() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.changes)
}

// TestProjectorScrambledHistory posts RUNNING, FAILED and a redriven
// RUNNING → SUCCEEDED for a few tenants in scrambled order with duplicates:
// the view ends as in order and the change feed carries one message per
// real change.
func TestProjectorScrambledHistory(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	changes := countChanges(t, b.Conn)
	runProjector(t, b, view, projectorConfig())
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	redriven := []substate.Event{ // tenant a: fails, is redriven, succeeds
		sfn("a", "exec-a", substate.StateRunning, 0, 1, t0, ""),
		sfn("a", "exec-a", substate.StateFailed, 0, 2, t0, "quota exceeded"),
		sfn("a", "exec-a", substate.StateRunning, 1, 1, t0, ""),
		sfn("a", "exec-a", substate.StateSucceeded, 1, 2, t0, ""),
	}
	failed := []substate.Event{ // tenant b: fails
		sfn("b", "exec-b", substate.StateRunning, 0, 1, t0, ""),
		sfn("b", "exec-b", substate.StateFailed, 0, 2, t0, "card declined"),
	}
	running := []substate.Event{sfn("c", "exec-c", substate.StateRunning, 0, 1, t0, "")}
	scrambled := []substate.Event{redriven[3], failed[1], redriven[0], running[0], failed[0], redriven[1], redriven[3], failed[1], redriven[2]}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), scrambled); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the projector to catch up", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))

	ctx := context.Background()
	for tenant, want := range map[string]substate.SubState{"a": substate.StateSucceeded, "b": substate.StateFailed, "c": substate.StateRunning} {
		v, err := view.Tenant(ctx, tenant)
		if err != nil || v.WorkflowSubState != want {
			t.Errorf("tenant %s: %s (%v), want %s", tenant, v.WorkflowSubState, err, want)
		}
	}
	page, err := view.Tenants(ctx, substate.TenantFilter{HasError: true})
	if err != nil || len(page.Tenants) != 1 || page.Tenants[0].TenantID != "b" || page.Tenants[0].WorkflowErrorMessage != "card declined" {
		t.Errorf("tenants with an error: %+v %v, want b", page.Tenants, err)
	}
	stats := view.Stats()
	// a's first event in the stream is its success, b's its failure, c's
	// its start: three changes; the other four events are older, and the
	// two repeated ids never reach the stream.
	if stats.Applied != 3 || stats.Stale != 4 {
		t.Errorf("view stats %+v, want 3 applied and 4 stale", stats)
	}
	pipelinetest.WaitFor(t, "the change feed", func() bool { return changes.len() >= int(stats.Applied) })
	time.Sleep(50 * time.Millisecond) // nothing more may arrive
	if got := changes.len(); got != int(stats.Applied) || got == 0 {
		t.Fatalf("change feed carried %d messages for %d real changes", got, stats.Applied)
	}
	for _, c := range changes.changes {
		if c.Old == c.New {
			t.Errorf("change feed message without a change: %+v", c)
		}
	}
}

// TestProjectorUnchangedEventsWriteNothing republishes events that change
// nothing under new ids: no write transaction, no change message.
func TestProjectorUnchangedEventsWriteNothing(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	changes := countChanges(t, b.Conn)
	runProjector(t, b, view, projectorConfig())
	pub := publishers.NewJetStream(b.JetStream)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	first := sfn("a", "exec-a", substate.StateFailed, 0, 2, t0, "boom")
	if err := pub.PublishEvents(context.Background(), []substate.Event{first}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the first event", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	commits := view.Stats().Commits
	var again []substate.Event
	for i := range 200 {
		e := first
		e.ID = fmt.Sprintf("again-%d", i)
		again = append(again, e)
	}
	if err := pub.PublishEvents(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the repeats", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	if got := view.Stats().Commits; got != commits {
		t.Fatalf("%d write transactions for 200 unchanged events, want 0", got-commits)
	}
	if changes.len() != 1 {
		t.Fatalf("change feed carried %d messages, want 1", changes.len())
	}
}

// TestProjectorReadsGaps starts the projector's consumer past events the
// view has not seen (as when their delivery is still pending): the
// projector reads them from the stream first.
func TestProjectorReadsGaps(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	events := []substate.Event{
		sfn("a", "exec-a", substate.StateRunning, 0, 1, t0, ""),
		sfn("b", "exec-b", substate.StateFailed, 0, 2, t0, "boom"),
		sfn("c", "exec-c", substate.StateRunning, 0, 1, t0, ""),
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	cfg := projectorConfig()
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, 3
	runProjector(t, b, view, cfg)
	pipelinetest.WaitFor(t, "the projector", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	for _, tenant := range []string{"a", "b", "c"} {
		if _, err := view.Tenant(context.Background(), tenant); err != nil {
			t.Errorf("tenant %s: %v", tenant, err)
		}
	}
	if cp, _ := view.Checkpoint(context.Background()); cp != 3 {
		t.Errorf("checkpoint %d, want 3", cp)
	}
}

// TestProjectorReadsGapsInsideABatch gives the projector a batch whose
// sequences skip some still awaiting redelivery, as after a worker died
// holding them: a redelivery that is due and a new message come together,
// while the messages between them come back only later. The projector
// reads the ones between from the stream before applying the batch, so
// their later redelivery is skipped instead of lost.
func TestProjectorReadsGapsInsideABatch(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	pub := publishers.NewJetStream(b.JetStream)
	var events []substate.Event // one tenant's retries: each running after backing-off counts one
	for i := range 5 {
		events = append(events,
			engineEvent("a", substate.StateBackingOff, uint64(2*i+1), t0),
			engineEvent("a", substate.StateRunning, uint64(2*i+2), t0))
	}
	if err := pub.PublishEvents(ctx, events[:9]); err != nil {
		t.Fatal(err)
	}

	// A worker that dies holding sequences 1 to 9: 1 is due again at once,
	// 2 to 9 only after a while.
	c, err := bus.ConsumerFrom(ctx, b.JetStream, substate.StreamEvents, projectorConfig(), 0)
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.FetchNoWait(9)
	if err != nil {
		t.Fatal(err)
	}
	for m := range held.Messages() {
		if meta, _ := m.Metadata(); meta.Sequence.Stream == 1 {
			m.Nak()
		} else {
			m.NakWithDelay(time.Second)
		}
	}
	if err := pub.PublishEvents(ctx, events[9:]); err != nil { // sequence 10, new
		t.Fatal(err)
	}

	runProjector(t, b, view, projectorConfig())
	pipelinetest.WaitFor(t, "the projector", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	v, err := view.Tenant(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if v.WorkflowRetryCount != 5 || v.WorkflowSubState != substate.StateRunning {
		t.Errorf("view %s with %d retries, want running with 5: the events between 1 and 10 were lost", v.WorkflowSubState, v.WorkflowRetryCount)
	}
	if cp, _ := view.Checkpoint(ctx); cp != 10 {
		t.Errorf("checkpoint %d, want 10", cp)
	}
}

// engineEvent builds an engine event of tenant's one execution at seq,
// with no retry count of its own: the view infers retries.
func engineEvent(tenant string, s substate.SubState, seq uint64, started time.Time) substate.Event {
	d := substate.EventData{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "run-1", Workflow: "provision",
		SubState: s, ProviderState: string(s), ExecutionStartedAt: started,
		OccurredAt: started.Add(time.Duration(seq) * time.Second), Revision: substate.Revision(seq)}
	if s == substate.StateBackingOff {
		d.ErrorMessage = "throttled"
	}
	d.Normalize()
	return substate.NewEvent(fmt.Sprintf("%s/%d", tenant, seq), d)
}

func TestProjectorDeadLettersBadEvents(t *testing.T) {
	b := newBus(t)
	view := pipelinetest.OpenView(t)
	runProjector(t, b, view, projectorConfig())
	if _, err := b.JetStream.Publish(context.Background(), substate.EventsSubject("x"), []byte(`{"specversion":"1.0","type":"other"}`)); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the dead letter", func() bool { return streamCount(t, b.JetStream, substate.StreamDLQ) == 1 })
	pipelinetest.WaitFor(t, "the ack", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	if m := streamMsgs(t, b.JetStream, substate.StreamDLQ)[0]; m.Header.Get(substate.HeaderDLQStage) != substate.StageProject {
		t.Fatalf("stage %q", m.Header.Get(substate.HeaderDLQStage))
	}
}

// The worker's projector consumer acks cumulatively: a batch costs one ack
// after its commit, not one per event. Acks travel on $JS.ACK subjects,
// which any subscriber on the account also receives.
func TestProjectorOneAckPerBatch(t *testing.T) {
	b := newBus(t)
	var acks atomic.Int64
	sub, err := b.Conn.Subscribe("$JS.ACK."+substate.StreamEvents+"."+bus.ProjectorConsumer("")+".>", func(*nats.Msg) { acks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var events []substate.Event
	for i := range 200 {
		events = append(events, engineEvent(fmt.Sprintf("t%d", i), substate.StateRunning, 1, time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)))
	}
	if err := publishers.NewJetStream(b.JetStream).PublishEvents(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	view := pipelinetest.OpenView(t)
	runProjector(t, b, view, projectorConfig())
	pipelinetest.WaitFor(t, "the projector", pipelinetest.Settled(t, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")))
	if err := b.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, commits := acks.Load(), view.Stats().Commits; got == 0 || got > int64(commits) {
		t.Fatalf("%d acks for 200 events in %d commits, want one per commit", got, commits)
	}
}

// When a bad event cannot be dead-lettered, its batch is handed back whole:
// nothing of it is applied or acknowledged, since an ack of the batch would
// also cover the event that was not kept anywhere.
func TestProjectorHandsBackABatchWhoseDeadLetterFails(t *testing.T) {
	b := newBus(t)
	tries := make(chan struct{}, 8)
	dlq := deadLetterFunc(func(context.Context, substate.DeadLetter) error {
		tries <- struct{}{}
		return substate.Errorf(substate.EUNAVAILABLE, "dead-letter stream away")
	})
	js := b.JetStream
	good := engineEvent("a", substate.StateRunning, 1, time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	if err := publishers.NewJetStream(js).PublishEvents(context.Background(), []substate.Event{good}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), substate.EventsSubject("x"), []byte(`{"specversion":"1.0","type":"other"}`)); err != nil {
		t.Fatal(err)
	}
	view := pipelinetest.OpenView(t)
	runProjectorWith(t, b, view, projectorConfig(), dlq)
	for range 2 { // the first try, and the redelivery of the handed-back batch
		select {
		case <-tries:
		case <-time.After(30 * time.Second):
			t.Fatal("the bad event was not dead-lettered again")
		}
	}
	if _, err := view.Tenant(context.Background(), "a"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("tenant a: %v, want it not applied", err)
	}
	if info := pipelinetest.ConsumerInfo(t, js, substate.StreamEvents, bus.ProjectorConsumer("")); info.AckFloor.Stream != 0 {
		t.Errorf("ack floor %d, want nothing acknowledged", info.AckFloor.Stream)
	}
}

// deadLetterFunc is a dead-letter publisher made of a function.
type deadLetterFunc func(context.Context, substate.DeadLetter) error

func (f deadLetterFunc) PublishDeadLetter(ctx context.Context, d substate.DeadLetter) error {
	return f(ctx, d)
}
