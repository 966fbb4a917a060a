package bus_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// secured is an embedded server with substate's streams, one event and one
// raw message in them, and the projector's durable consumer.
type secured struct {
	b     *bus.Bus
	creds bus.Credentials
}

func newSecured(tb testing.TB) *secured {
	tb.Helper()
	b := openBus(tb)
	ctx := context.Background()
	if err := bus.DefaultTopology().EnsureStreams(ctx, b.JetStream); err != nil {
		tb.Fatal(err)
	}
	if _, err := bus.EnsureConsumer(ctx, b.JetStream, substate.StreamEvents, bus.ProjectorConsumerConfig("", time.Minute, 1)); err != nil {
		tb.Fatal(err)
	}
	for _, subj := range []string{substate.EventsSubject("victim"), substate.RawSubject(substate.RawEngine)} {
		if _, err := b.JetStream.Publish(ctx, subj, []byte(`{}`)); err != nil {
			tb.Fatal(err)
		}
	}
	creds, _ := b.Credentials()
	return &secured{b: b, creds: creds}
}

// client is a connection whose asynchronous errors (permission
// violations) are collected.
type client struct {
	nc   *nats.Conn
	errs chan error
}

func (s *secured) connect(tb testing.TB, id bus.Identity) *client {
	tb.Helper()
	opts, err := s.creds.Options(id)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := dial(s.b.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("connect as %s: %v", id, err)
	}
	tb.Cleanup(c.nc.Close)
	return c
}

func dial(url string, opts ...nats.Option) (*client, error) {
	c := &client{errs: make(chan error, 64)}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case c.errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect(url, opts...)
	c.nc = nc
	return c, err
}

// denied runs action and waits for the server to report a permission
// violation naming subject.
func (c *client) denied(tb testing.TB, subject string, action func(context.Context)) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); action(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			tb.Fatalf("no permission violation for %q", subject)
		}
	}
}

// count returns how many messages a stream holds, read as the worker.
func (s *secured) count(tb testing.TB, stream string) uint64 {
	tb.Helper()
	st, err := s.b.JetStream.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

func TestAnonymousAndUnknownClientsRefused(t *testing.T) {
	s := newSecured(t)
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := stranger.Seed()
	strangerFile := filepath.Join(t.TempDir(), "stranger.nk")
	if err := os.WriteFile(strangerFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	strangerKey, err := nats.NkeyOptionFromSeed(strangerFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"Anonymous", nil},
		{"UnknownNkey", []nats.Option{strangerKey}},
		{"Password", []nats.Option{nats.UserInfo("substate", "substate")}},
		{"Token", []nats.Option{nats.Token("substate")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dial(s.b.ClientURL(), tc.opts...)
			if err == nil {
				c.nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("error %v, want an authorization violation", err)
			}
		})
	}
}

func TestTaskServiceServesTasksAndNothingElse(t *testing.T) {
	s := newSecured(t)
	task := s.connect(t, bus.Tasks)
	svc, err := micro.AddService(task.nc, micro.Config{Name: "svc", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("work", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{"done":true}`)) }),
		micro.WithEndpointSubject(substate.TaskSubject("svc", "work")))
	if err == nil {
		err = task.nc.Flush() // the server has the subscription before the request
	}
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.b.Conn.Request(substate.TaskSubject("svc", "work"), []byte(`{}`), 10*time.Second)
	if err != nil || string(reply.Data) != `{"done":true}` {
		t.Fatalf("task reply %v, %v", reply, err)
	}

	t.Run("SubscribeAll", func(t *testing.T) {
		task.denied(t, ">", func(context.Context) { _, _ = task.nc.SubscribeSync(">") })
	})
	t.Run("SubscribeRaw", func(t *testing.T) {
		task.denied(t, "substate.raw.>", func(context.Context) { _, _ = task.nc.SubscribeSync("substate.raw.>") })
	})
	t.Run("PublishEvent", func(t *testing.T) {
		task.denied(t, "substate.events.x", func(context.Context) { _ = task.nc.Publish("substate.events.x", []byte(`{}`)) })
	})
	t.Run("PublishToAnInboxItWasNotAsked", func(t *testing.T) {
		task.denied(t, "_INBOX.someone", func(context.Context) { _ = task.nc.Publish("_INBOX.someone", nil) })
	})
	t.Run("PurgeRaw", func(t *testing.T) {
		task.denied(t, "$JS.API.STREAM.PURGE."+substate.StreamRaw, func(ctx context.Context) {
			_, _ = task.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+substate.StreamRaw, nil)
		})
	})
	if n := s.count(t, substate.StreamEvents); n != 1 {
		t.Errorf("%s holds %d messages, want the 1 published", substate.StreamEvents, n)
	}
	if n := s.count(t, substate.StreamRaw); n != 1 {
		t.Errorf("%s holds %d messages, want the 1 published", substate.StreamRaw, n)
	}
}

func TestSubscriberReadsEventsOnly(t *testing.T) {
	s := newSecured(t)
	sub := s.connect(t, bus.Subscriber)
	ctx := context.Background()

	t.Run("ReadsEventsWithItsOwnConsumer", func(t *testing.T) {
		js, err := jetstream.New(sub.nc)
		if err != nil {
			t.Fatal(err)
		}
		// A reader without acknowledgements, gone a minute after its
		// last pull: what an ordered consumer is, under a given name.
		cons, err := js.CreateOrUpdateConsumer(ctx, substate.StreamEvents, jetstream.ConsumerConfig{
			Name: "subscriber-1", AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil || msg.Subject() != substate.EventsSubject("victim") {
			t.Fatalf("next event: %v", err)
		}
		durable, err := js.CreateOrUpdateConsumer(ctx, substate.StreamEvents, jetstream.ConsumerConfig{Durable: "subscriber-2", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		msg, err = durable.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("ack its own consumer: %v", err)
		}
	})
	t.Run("ReceivesLiveEvents", func(t *testing.T) {
		live, err := sub.nc.SubscribeSync(substate.SubjectEventsPrefix + ">")
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.b.JetStream.Publish(ctx, substate.EventsSubject("acme"), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if m, err := live.NextMsg(10 * time.Second); err != nil || m.Subject != substate.EventsSubject("acme") {
			t.Fatalf("live event: %v", err)
		}
	})
	for _, tc := range []struct {
		name, subject string
		action        func(context.Context)
	}{
		{"SubscribeAll", ">", func(context.Context) { _, _ = sub.nc.SubscribeSync(">") }},
		{"SubscribeRaw", "substate.raw.>", func(context.Context) { _, _ = sub.nc.SubscribeSync("substate.raw.>") }},
		{"SubscribeWorkerInboxes", "_INBOX.>", func(context.Context) { _, _ = sub.nc.SubscribeSync("_INBOX.>") }},
		{"PublishEvent", "substate.events.x", func(context.Context) { _ = sub.nc.Publish("substate.events.x", []byte(`{}`)) }},
		{"PublishRaw", "substate.raw.engine.status", func(context.Context) { _ = sub.nc.Publish("substate.raw.engine.status", []byte(`{}`)) }},
		{"PurgeEvents", "$JS.API.STREAM.PURGE." + substate.StreamEvents, request(sub.nc, "$JS.API.STREAM.PURGE."+substate.StreamEvents)},
		{"DeleteEvents", "$JS.API.STREAM.DELETE." + substate.StreamEvents, request(sub.nc, "$JS.API.STREAM.DELETE."+substate.StreamEvents)},
		{"ReadRaw", "$JS.API.STREAM.INFO." + substate.StreamRaw, request(sub.nc, "$JS.API.STREAM.INFO."+substate.StreamRaw)},
		{"ReadRawConsumer", "$JS.API.CONSUMER.CREATE." + substate.StreamRaw, request(sub.nc, "$JS.API.CONSUMER.CREATE."+substate.StreamRaw+".x")},
		{"PullProjectorMessages", "$JS.API.CONSUMER.MSG.NEXT." + substate.StreamEvents + ".substate-projector",
			request(sub.nc, "$JS.API.CONSUMER.MSG.NEXT."+substate.StreamEvents+".substate-projector")},
		{"DeleteProjectorConsumer", "$JS.API.CONSUMER.DELETE." + substate.StreamEvents + ".substate-projector",
			request(sub.nc, "$JS.API.CONSUMER.DELETE."+substate.StreamEvents+".substate-projector")},
		{"CreateUnnamedConsumer", "$JS.API.CONSUMER.CREATE." + substate.StreamEvents,
			request(sub.nc, "$JS.API.CONSUMER.CREATE."+substate.StreamEvents)},
		{"CreateConsumerUnderAnotherName", "$JS.API.CONSUMER.CREATE." + substate.StreamEvents + ".billing",
			request(sub.nc, "$JS.API.CONSUMER.CREATE."+substate.StreamEvents+".billing")},
		{"CreateDurableUnderAnotherName", "$JS.API.CONSUMER.DURABLE.CREATE." + substate.StreamEvents + ".billing",
			request(sub.nc, "$JS.API.CONSUMER.DURABLE.CREATE."+substate.StreamEvents+".billing")},
		{"ChangeProjectorConsumer", "$JS.API.CONSUMER.CREATE." + substate.StreamEvents + ".substate-projector",
			request(sub.nc, "$JS.API.CONSUMER.CREATE."+substate.StreamEvents+".substate-projector.substate.events.nobody")},
		{"AckProjectorMessages", "$JS.ACK." + substate.StreamEvents + ".substate-projector",
			func(context.Context) {
				_ = sub.nc.Publish("$JS.ACK."+substate.StreamEvents+".substate-projector.1.1.1.1.0", []byte("+ACK"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { sub.denied(t, tc.subject, tc.action) })
	}
	if n := s.count(t, substate.StreamEvents); n != 2 {
		t.Errorf("%s holds %d messages, want the 2 the worker published", substate.StreamEvents, n)
	}
	if n := s.count(t, substate.StreamRaw); n != 1 {
		t.Errorf("%s holds %d messages, want 1", substate.StreamRaw, n)
	}
	c, err := s.b.JetStream.Consumer(ctx, substate.StreamEvents, "substate-projector")
	if err != nil {
		t.Fatalf("the projector's consumer: %v", err)
	}
	if info, _ := c.Info(ctx); info.NumPending != 2 || info.Config.FilterSubject != "" {
		t.Errorf("projector consumer: %d pending, filter %q; want 2 and none", info.NumPending, info.Config.FilterSubject)
	}
}

// The projector's deadline loop reads how far the normalizer has come:
// the normalizer's consumer info and a direct get on SUBSTATE_RAW. Every
// role connects as the worker, so a projector-only process may (its
// permissions need nothing more); a subscriber may do neither.
func TestNormalizersProgressReadableByTheWorkerOnly(t *testing.T) {
	s := newSecured(t)
	ctx := context.Background()
	if _, err := bus.EnsureConsumer(ctx, s.b.JetStream, substate.StreamRaw, bus.ConsumerConfig(bus.ConsumerNormalizer, time.Minute, 1)); err != nil {
		t.Fatal(err)
	}
	worker := s.connect(t, bus.Worker)
	js, err := jetstream.New(worker.nc)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := js.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := raw.Consumer(ctx, bus.ConsumerNormalizer)
	if err != nil {
		t.Fatalf("the normalizer's consumer info, as the worker: %v", err)
	}
	if got, want := c.CachedInfo().NumPending, uint64(1); got != want {
		t.Errorf("normalizer pending: %d, want %d", got, want)
	}
	msg, err := raw.GetMsg(ctx, c.CachedInfo().AckFloor.Stream+1, jetstream.WithGetMsgSubject(substate.SubjectRawPrefix+">"))
	if err != nil || msg.Subject != substate.RawSubject(substate.RawEngine) {
		t.Fatalf("direct get on %s, as the worker: %+v, %v", substate.StreamRaw, msg, err)
	}

	sub := s.connect(t, bus.Subscriber)
	for _, subject := range []string{
		"$JS.API.CONSUMER.INFO." + substate.StreamRaw + "." + bus.ConsumerNormalizer,
		"$JS.API.DIRECT.GET." + substate.StreamRaw,
	} {
		t.Run(subject, func(t *testing.T) { sub.denied(t, subject, request(sub.nc, subject)) })
	}
}

// TestSubscriberConsumerNames: the subscriber's consumer names are
// checked when the server starts.
func TestSubscriberConsumerNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		err   string
	}{
		{[]string{"billing", "alerting"}, ""},
		{[]string{"substate-projector"}, "are the worker's"},
		{[]string{"substate-anything"}, "are the worker's"},
		{[]string{"a.b"}, "without dots"},
		{[]string{">"}, "without dots"},
		{[]string{""}, "1 to 64"},
		{make([]string, bus.MaxSubscriberConsumers+1), "more than the 256 allowed"},
	} {
		err := bus.Consumers{Worker: bus.WorkerConsumers(), Subscriber: tc.names}.Check()
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%.40q: %v, want %q", tc.names, err, tc.err)
		}
	}
}

func request(nc *nats.Conn, subject string) func(context.Context) {
	return func(ctx context.Context) { _, _ = nc.RequestWithContext(ctx, subject, []byte(`{}`)) }
}

func TestCredentialsFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "credentials")
	creds, err := bus.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	keys := map[bus.Identity]string{}
	for _, id := range bus.Identities {
		fi, err := os.Stat(creds.SeedFile(id))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s seed mode %v, %v; want 0600", id, fi.Mode().Perm(), err)
		}
		if keys[id], err = creds.PublicKey(id); err != nil || !nkeys.IsValidPublicUserKey(keys[id]) {
			t.Fatalf("%s public key %q, %v", id, keys[id], err)
		}
	}
	t.Run("KeptAcrossStarts", func(t *testing.T) {
		again, err := bus.EnsureCredentials(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range bus.Identities {
			if k, _ := again.PublicKey(id); k != keys[id] {
				t.Errorf("%s key changed from %s to %s", id, keys[id], k)
			}
		}
	})
	t.Run("ErrReadableByOthers", func(t *testing.T) {
		if err := os.Chmod(creds.SeedFile(bus.Tasks), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(creds.SeedFile(bus.Tasks), 0o600)
		if _, err := bus.EnsureCredentials(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("err %v, want a refusal naming chmod 600", err)
		}
	})
	t.Run("ErrNotASeed", func(t *testing.T) {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "worker.nk"), []byte("hello\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := bus.EnsureCredentials(bad); err == nil {
			t.Fatal("a file without a seed was accepted")
		}
	})
}
