package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// consumers is how many consumers a stream of the worker has.
func consumers(tb testing.TB, w *workertest.Worker, stream string) int {
	tb.Helper()
	s, err := w.Bus.JetStream.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Consumers
}

// metricsHave waits until the worker's /metrics has every line of want.
func metricsHave(tb testing.TB, w *workertest.Worker, want ...string) {
	tb.Helper()
	workertest.Eventually(tb, func() string {
		_, _, body := workertest.APIGet(tb, w.HTTP.URL()+"/metrics", "")
		for _, line := range want {
			if !strings.Contains(body, line+"\n") {
				return "/metrics has no " + line
			}
		}
		return ""
	})
}

// The attack on the readers of the streams: 10,000 history reads, eight
// clients at a time, as anyone may make on a loopback worker without keys
// (each once opened a consumer on SUBSTATE_EVENTS that the server kept for
// five minutes, until the stream's consumers ran out). The reads hold no
// consumer: the stream has the worker's own and no more, every read
// answers 200, and verify and the worker's evidence check still work — the
// check still finds an event published without its evidence.
func TestHistoryReadsHoldNoConsumer(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.EvidenceCheckInterval = 100 * time.Millisecond })
	workertest.IngestTenant(t, w.HTTP.URL(), "acme", "")
	waitApplied(t, w, 1)
	own := consumers(t, w, substate.StreamEvents)

	const reads, clients = 10000, 8
	url := w.HTTP.URL() + "/v1/tenants/acme/history?raw=true"
	var wg sync.WaitGroup
	failures := make(chan string, clients)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < reads; i += clients {
				resp, err := http.Get(url)
				if err != nil {
					failures <- fmt.Sprintf("read %d: %v", i, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"subState":"failed"`) {
					failures <- fmt.Sprintf("read %d: %d %.200s", i, resp.StatusCode, body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
	if got := consumers(t, w, substate.StreamEvents); got != own {
		t.Fatalf("%s has %d consumers after %d history reads, want the worker's own %d", substate.StreamEvents, got, reads, own)
	}
	if v := verifyEqual(t, w); v.Evidence == nil || v.Evidence.Counts["verified"] != 1 {
		t.Fatalf("verify after the reads: evidence %+v, want 1 verified", v.Evidence)
	}
	forged := substate.EventData{TenantID: "acme", Provider: substate.ProviderEngine, ExecutionID: "run-x",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
	forged.Normalize()
	if err := publishers.NewJetStream(w.Bus.JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", forged)}); err != nil {
		t.Fatal(err)
	}
	metricsHave(t, w, `substate_evidence_events_total{outcome="missing"} 1`)
}

// The attack on the streams' consumer limit: the subscriber identity asks
// for 1,000 durable consumers on SUBSTATE_EVENTS under names of its own
// choosing (once it got 995 of them, which never expire, and the stream's
// 1,000 were gone for the worker). It may create consumers only under the
// names it was given (--subscriber-consumers), so it holds those four and
// no more; the worker still creates consumers of its own (a new
// projector's durable, the ordered consumer of events tail), and history
// and verify still work.
func TestSubscriberCannotFillConsumers(t *testing.T) {
	w := workertest.Start(t)
	workertest.IngestTenant(t, w.HTTP.URL(), "acme", "")
	waitApplied(t, w, 1)
	own := consumers(t, w, substate.StreamEvents)

	creds, _ := w.Bus.Credentials()
	opts, err := creds.Options(bus.Subscriber)
	if err != nil {
		t.Fatal(err)
	}
	var violations atomic.Int64 // each refused request, counted instead of printed (on the client's callback goroutine)
	nc, err := nats.Connect(w.Bus.ClientURL(), append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { violations.Add(1) }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	created := attackConsumers(t, nc, 1000)
	for _, name := range w.Flags.SubscriberConsumers {
		js, _ := jetstream.New(nc)
		if _, err := js.CreateOrUpdateConsumer(context.Background(), substate.StreamEvents, jetstream.ConsumerConfig{Durable: name}); err != nil {
			t.Fatalf("the subscriber's own consumer %s: %v", name, err)
		}
	}
	if got, want := consumers(t, w, substate.StreamEvents), own+len(w.Flags.SubscriberConsumers); got != want || created != 0 {
		t.Fatalf("after the attack %s has %d consumers (%d of the attack's), want %d: the worker's and the subscriber's %d", substate.StreamEvents, got, created, want, len(w.Flags.SubscriberConsumers))
	}

	_ = nc.Flush()
	// The client reports each -ERR on its own callback goroutine, after
	// the read loop has seen it: wait for the first.
	for deadline := time.Now().Add(10 * time.Second); violations.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if violations.Load() == 0 {
		t.Error("no permission violation reported to the attacker")
	}
	ctx := context.Background()
	if _, err := bus.EnsureConsumer(ctx, w.Bus.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("replica-2", time.Minute, 1)); err != nil {
		t.Fatalf("the worker creates a projector's consumer: %v", err)
	}
	tail, err := w.Bus.JetStream.OrderedConsumer(ctx, substate.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("the worker's ordered consumer: %v", err)
	}
	if _, err := tail.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatalf("the worker's ordered consumer reads: %v", err)
	}
	if code, _, body := workertest.APIGet(t, w.HTTP.URL()+"/v1/tenants/acme/history", ""); code != http.StatusOK {
		t.Fatalf("history after the attack: %d %s", code, body)
	}
	verifyEqual(t, w)
}

// attackConsumers asks for n durable consumers under names of the
// attacker's choosing, all at once, and returns how many were created.
func attackConsumers(tb testing.TB, nc *nats.Conn, n int) int {
	tb.Helper()
	replies, err := nc.SubscribeSync(bus.SubscriberInboxPrefix + ".attack.*")
	if err != nil {
		tb.Fatal(err)
	}
	defer replies.Unsubscribe()
	for i := range n {
		name := fmt.Sprintf("attack-%d", i)
		body, _ := json.Marshal(map[string]any{"stream_name": substate.StreamEvents,
			"config": map[string]any{"durable_name": name, "ack_policy": "explicit"}})
		subject := "$JS.API.CONSUMER.DURABLE.CREATE." + substate.StreamEvents + "." + name
		if i%2 == 1 {
			subject = "$JS.API.CONSUMER.CREATE." + substate.StreamEvents + "." + name
			body, _ = json.Marshal(map[string]any{"stream_name": substate.StreamEvents,
				"config": map[string]any{"name": name, "durable_name": name, "ack_policy": "explicit"}})
		}
		if err := nc.PublishRequest(subject, fmt.Sprintf("%s.attack.%d", bus.SubscriberInboxPrefix, i), body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	created := 0
	for {
		m, err := replies.NextMsg(2 * time.Second)
		if err != nil {
			return created // no more answers
		}
		var resp struct {
			Error *struct{ Description string } `json:"error"`
		}
		if json.Unmarshal(m.Data, &resp) == nil && resp.Error == nil {
			created++
		}
	}
}

// The NATS store deleted under a running worker (once: 40 s of 202s,
// still ready, nothing logged, and at the next start every event it had
// acknowledged was gone). The worker notices within seconds, stops
// acknowledging (ingest answers 503 until it exits), and exits with one
// line saying why; its restart finds the stream gone and rebuilds the
// view from what the new store holds, and events posted then reach it.
func TestStoreDeletedUnderRunningWorker(t *testing.T) {
	dir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dir))
	url := w.HTTP.URL()
	workertest.PostRows(t, url, "old", 200)
	waitApplied(t, w, 200)
	if err := os.RemoveAll(filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	accepted, refused := 0, 0
	for i := 0; time.Since(deleted) < 15*time.Second; i++ {
		select {
		case <-w.Done():
		default:
			switch err := workertest.DeliverRow(url, fmt.Sprintf("after-%d", i), workertest.RestateRow(fmt.Sprintf("after%04d", i), 0)); {
			case err == nil:
				accepted++
			case strings.Contains(err.Error(), "503"):
				refused++
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		break
	}
	if took := time.Since(deleted); took > 10*time.Second {
		t.Fatalf("the worker still ran %s after its store was deleted (%d events accepted meanwhile)", took.Round(time.Second), accepted)
	}
	err := w.Wait(t)
	if err == nil || !strings.HasPrefix(err.Error(), "nats store was deleted or replaced under the running server: ") || !strings.Contains(err.Error(), filepath.Join(dir, "nats")) {
		t.Fatalf("the worker stopped with %v, want the store named as gone", err)
	}
	t.Logf("after the deletion: %d accepted, %d refused with 503 before the worker exited", accepted, refused)

	w2 := workertest.Start(t, workertest.DataDir(dir))
	workertest.PostRows(t, w2.HTTP.URL(), "new", 100)
	waitApplied(t, w2, 100)
	if _, err := w2.View.Tenant(context.Background(), "new0099"); err != nil {
		t.Fatalf("tenant new0099 after the restart: %v", err)
	}
	verifyEqual(t, w2)
}

// Events gone from SUBSTATE_EVENTS while their raw evidence is still in
// SUBSTATE_RAW (a tenant's subject purged here; a store cut short does the
// same): verify names the raw messages whose events are missing and the
// command that maps them again, and once it has run, finds nothing. (The
// purged ids stay in the stream's duplicate window, which is made short
// here: a store cut short is reloaded without them.)
func TestVerifyReportsEventsLostFromTheStream(t *testing.T) {
	w := workertest.Start(t, func(f *worker.Flags) { f.DedupeWindow = time.Second })
	workertest.PostRows(t, w.HTTP.URL(), "t", 300)
	waitApplied(t, w, 300)
	ctx := context.Background()
	s, err := w.Bus.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(substate.EventsSubject("t0150"))); err != nil {
		t.Fatal(err)
	}
	res := verify(t, w)
	if res.Gaps == nil || res.Gaps.Count != 1 || res.Gaps.Events != 1 || res.Gaps.Gaps[0].Of != 100 || !res.Failed() {
		t.Fatalf("verify after the purge: gaps %+v, want 1 event of a raw message of 100 missing", res.Gaps)
	}
	time.Sleep(2 * time.Second) // past the duplicate window
	r := &replay.Renormalizer{Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: mapping.New(mapping.Config{}),
		EventID: mapping.EventID, Events: publishers.NewJetStream(w.Bus.JetStream)}
	if got, err := r.Run(ctx, replay.Range{Since: res.Gaps.Gaps[0].Stored}); err != nil || got.Published != 1 {
		t.Fatalf("renormalize --since the gap: %+v %v, want 1 event published", got, err)
	}
	workertest.WaitSettled(t, w.Bus.ClientURL(), bustest.Seed(t, w.Bus, bus.Worker))
	verifyEqual(t, w)
}
