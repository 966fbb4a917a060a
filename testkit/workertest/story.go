package workertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// T0 is when the tests' stories start.
var T0 = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

// Step is one status event of the built-in engine in a story: execution
// Exec's Seq-th event, with its status, retries and error.
type Step struct {
	Exec    string
	Seq     uint64
	Status  string
	Retries int
	Err     string
}

// Story is a tenant's provisioning: a payment task that fails, backs off,
// retries, fails for good; a duplicate and a late event in between; then a
// second run, and a late success of the first that must not resurrect it.
var Story = []Step{
	{"run-1", 1, "running", 0, ""},
	{"run-1", 2, "error", 0, "card declined"},
	{"run-1", 3, "backing-off", 1, "card declined"},
	{"run-1", 4, "running", 1, ""},
	{"run-1", 2, "error", 0, "card declined"}, // redelivered late
	{"run-1", 5, "running", 1, ""},            // newer, nothing to write
	{"run-1", 6, "failed", 1, "payment provider returned HTTP 503"},
	{"run-2", 1, "running", 0, ""},
	{"run-1", 7, "succeeded", 1, ""}, // late, of the older run
}

// Rerun is a run that fails, is resumed under the same execution id (as a
// Step Functions redrive is) and succeeds; its failure arrives again late.
// The success ends the same execution: it is no newer one, though it
// clears the execution id from the view.
var Rerun = []Step{
	{"run-1", 1, "running", 0, ""},
	{"run-1", 2, "failed", 0, "quota exceeded"},
	{"run-1", 3, "running", 0, ""},
	{"run-1", 4, "succeeded", 0, ""},
	{"run-1", 2, "failed", 0, "quota exceeded"}, // redelivered late
}

// PublishStory puts the engine's raw events of tenant on SUBSTATE_RAW and
// normalizes them, as the worker would, into SUBSTATE_EVENTS (a worker on
// b normalizes them too, into the same events, which JetStream stores
// once). Run "run-2" starts an hour after T0, every other run at T0.
func PublishStory(tb testing.TB, b *bus.Bus, tenant string, steps []Step) {
	tb.Helper()
	pub := publishers.NewJetStream(b.JetStream)
	for i, s := range steps {
		started := T0
		if s.Exec == "run-2" {
			started = T0.Add(time.Hour)
		}
		ev := substate.EngineEvent{
			ID: substate.EngineEventID(s.Exec, s.Seq), TenantID: tenant, ExecutionID: s.Exec, Workflow: "provision",
			Seq: s.Seq, Status: s.Status, State: "Charge", Attempt: s.Retries + 1, RetryCount: s.Retries,
			Error: s.Err, StartedAt: started, Time: started.Add(time.Duration(s.Seq) * time.Minute),
		}
		if s.Err != "" {
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
