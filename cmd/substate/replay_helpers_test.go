package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// t0 is the start of the tests' story.
var t0 = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

// newTestBus starts an embedded NATS server with substate's streams, for
// commands that only read the streams.
func newTestBus(tb testing.TB) *bus.Bus { tb.Helper(); return bustest.Open(tb) }

// engineStep is one status event of the built-in engine in a story.
type engineStep struct {
	exec    string
	seq     uint64
	status  string
	retries int
	err     string
}

// publishStory puts the engine's raw events of tenant on SUBSTATE_RAW and
// normalizes them, as the worker would, into SUBSTATE_EVENTS.
func publishStory(tb testing.TB, b *bus.Bus, tenant string, steps []engineStep) {
	tb.Helper()
	pub := publishers.NewJetStream(b.JetStream)
	for i, s := range steps {
		started := t0
		if s.exec == "run-2" {
			started = t0.Add(time.Hour)
		}
		ev := substate.EngineEvent{
			ID: substate.EngineEventID(s.exec, s.seq), TenantID: tenant, ExecutionID: s.exec, Workflow: "provision",
			Seq: s.seq, Status: s.status, State: "Charge", Attempt: s.retries + 1, RetryCount: s.retries,
			Error: s.err, StartedAt: started, Time: started.Add(time.Duration(s.seq) * time.Minute),
		}
		if s.err != "" {
			ev.ErrorType = "PaymentError"
		}
		body, _ := json.Marshal(ev)
		// A unique raw id per step: a repeated step is a redelivery after
		// the duplicate window, stored twice.
		raw := substate.RawEvent{Kind: substate.RawEngine, ID: tenant + ":" + ev.ID + "#" + string(rune('a'+i)), Body: body}
		if err := pub.PublishRaw(context.Background(), raw); err != nil {
			tb.Fatal(err)
		}
	}
	r := &replay.Renormalizer{Reader: &replay.Reader{JS: b.JetStream}, Mapper: mapping.New(mapping.Config{}),
		EventID: mapping.EventID, Events: pub}
	if _, err := r.Run(context.Background(), replay.Range{}); err != nil {
		tb.Fatal(err)
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs from the golden file; run with -update if the change is right\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// publishMsg puts any bytes on a subject of b's streams.
func publishMsg(tb testing.TB, b *bus.Bus, subject, data string) {
	tb.Helper()
	if _, err := b.JetStream.Publish(context.Background(), subject, []byte(data)); err != nil {
		tb.Fatal(err)
	}
}

func newTestReader(b *bus.Bus) *replay.Reader { return &replay.Reader{JS: b.JetStream} }
