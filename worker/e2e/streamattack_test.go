package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// consumers is how many consumers a stream of the worker has, not
// counting the scans of its evidence check, which come and go on the
// check's own schedule.
func consumers(tb testing.TB, w *workertest.Worker, stream string) int {
	tb.Helper()
	s, err := w.Bus.JetStream.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	l := s.ListConsumers(context.Background())
	n := 0
	for c := range l.Info() {
		if c.Config.Description != replay.ScanDescription {
			n++
		}
	}
	if err := l.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
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
// acknowledged was gone), or replaced: renamed away and a copy put in its
// place, which the server does not write to either. The worker notices
// within seconds and stops acknowledging: from the first refusal on,
// /readyz answers 503 naming the store and no ingest is answered 202
// until the worker exits, with one line saying why. Its restart on the
// store as it is then (none, or the copy) serves again, and events posted
// then reach the view.
func TestStoreDeletedUnderRunningWorker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(store string) error
	}{
		{"Deleted", os.RemoveAll},
		{"Replaced", func(store string) error {
			if err := os.Rename(store, store+".old"); err != nil {
				return err
			}
			return copyDir(store+".old", store)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := workertest.Start(t, workertest.DataDir(dir))
			workertest.PostRows(t, w.HTTP.URL(), "old", 200)
			waitApplied(t, w, 200)
			checkStopsAcknowledging(t, w, filepath.Join(dir, "nats"), tc.change)

			w2 := workertest.Start(t, workertest.DataDir(dir))
			workertest.PostRows(t, w2.HTTP.URL(), "new", 100)
			workertest.Eventually(t, func() string {
				if _, err := w2.View.Tenant(context.Background(), "new0099"); err != nil {
					return fmt.Sprintf("tenant new0099 after the restart: %v", err)
				}
				return ""
			})
			verifyEqual(t, w2)
		})
	}
}

// copyDir copies the directory from, its files and their modes, to to.
func copyDir(from, to string) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, info.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
}

// probe is one request made while the store changes under the worker.
type probe struct {
	path       string
	start, end time.Time
	status     int // 0: no answer (the worker stopped listening)
	body       string
}

// checkStopsAcknowledging changes the worker's store and checks that the
// change is logged within seconds; from then on /readyz answers
// 503 naming the store and no delivery is accepted, neither a new one nor
// one whose body was on its way; and the worker exits, saying why.
//
// The worker stops listening a moment after it notices, so a new request
// may find no server rather than a 503. A delivery whose headers are in
// holds the server's shutdown open (it waits for requests in progress)
// while the test asks /readyz of the server's handler and then sends the
// rest of the body. Until the change is logged only /readyz is asked: a
// delivery acknowledged between the change and its detection is lost
// with the old files (the restart's stream check finds the view ahead of
// the copy and rebuilds it: TestStreamLossAfterStoreReplacedByCopy).
func checkStopsAcknowledging(t *testing.T, w *workertest.Worker, store string, change func(string) error) {
	t.Helper()
	url := w.HTTP.URL()
	held := holdDelivery(t, url)
	client := &http.Client{Timeout: 10 * time.Second}
	if err := change(store); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	const line = `msg="nats store gone under the running server; exiting"`
	var probes []probe
	var detected time.Time
	for detected.IsZero() {
		if time.Since(changed) > 10*time.Second {
			t.Fatalf("nothing logged %s after the store changed: %v", time.Since(changed).Round(time.Second), probes)
		}
		if strings.Contains(w.Logs(), line) {
			detected = time.Now()
		}
		probes = append(probes, send(client, http.MethodGet, url, "/readyz", "", nil))
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 5 {
		probes = append(probes, send(client, http.MethodPost, url, "/v1/ingest/restate", fmt.Sprintf("after-%d", i),
			workertest.RestateRow(fmt.Sprintf("after%04d", i), 0)))
		probes = append(probes, send(client, http.MethodGet, url, "/readyz", "", nil))
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	req.Host = "127.0.0.1"
	w.HTTP.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "nats store was deleted or replaced") {
		t.Errorf("/readyz once the change was logged: %d %s, want 503 naming the store", rec.Code, rec.Body)
	}
	if status, body := held(); status != http.StatusServiceUnavailable {
		t.Errorf("a delivery whose body ended after the change was logged: %d %s, want 503", status, body)
	}

	if err := w.Wait(t); err == nil || !strings.HasPrefix(err.Error(), "nats store was deleted or replaced under the running server: ") || !strings.Contains(err.Error(), store) {
		t.Fatalf("the worker stopped with %v, want the store named as gone", err)
	}
	logs := w.Logs()
	if i := strings.Index(logs, line); i < 0 || !strings.Contains(logs[i:], store) {
		t.Errorf("no log line saying the store %s is gone:\n%s", store, logs)
	}
	counts := map[string]int{}
	for _, p := range probes {
		counts[fmt.Sprintf("%s %d", p.path, p.status)]++
		if p.start.After(detected) && p.status != http.StatusServiceUnavailable && p.status != 0 {
			t.Errorf("%s sent %s after the change was logged: %d %s, want 503 or no answer", p.path, p.start.Sub(detected), p.status, p.body)
		}
	}
	t.Logf("answers after the change, up to %s after it (when it was logged): %v", detected.Sub(changed).Round(time.Millisecond), counts)
}

// holdDelivery sends the headers of a Restate delivery and half its body
// to url, and returns a function that sends the rest and returns the
// answer's status and body.
func holdDelivery(tb testing.TB, url string) func() (int, string) {
	tb.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	body := workertest.RestateRow("held0000", 0)
	fmt.Fprintf(c, "POST /v1/ingest/restate HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nwebhook-id: held\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(url, "http://"), len(body), body[:len(body)/2])
	return func() (int, string) {
		if _, err := c.Write(body[len(body)/2:]); err != nil {
			return 0, err.Error()
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// send makes one request and records its answer.
func send(client *http.Client, method, url, path, webhookID string, body []byte) probe {
	p := probe{path: path, start: time.Now()}
	req, _ := http.NewRequest(method, url+path, bytes.NewReader(body))
	if webhookID != "" {
		req.Header.Set("webhook-id", webhookID)
	}
	resp, err := client.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p.status, p.body = resp.StatusCode, string(b)
	}
	p.end = time.Now()
	return p
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
