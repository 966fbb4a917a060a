package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestCommandsLeaveNoConsumers: the commands that read the streams, run
// again and again, leave each stream with the consumers it had: they
// all read with direct gets, the tail and the dead-letter listing too.
func TestCommandsLeaveNoConsumers(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	workertest.IngestTenant(t, w.httpURL, "acme", "")
	if code := workertest.Post(t, w.httpURL+"/v1/ingest/eventbridge", []byte(`{"id":`), nil); code != http.StatusBadRequest {
		t.Fatalf("a malformed event: %d", code) // a dead letter to list
	}
	b := w.bus(t)
	count := func(stream string) int {
		s, err := b.JetStream.Stream(context.Background(), stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	events, dlq := count(substate.StreamEvents), count(substate.StreamDLQ)
	for range 3 {
		for _, args := range [][]string{
			{"events", "tail", "--from-start", "--count", "1"},
			{"events", "dlq"},
			{"audit", "--tenant", "acme", "--raw"},
			{"verify", "--server", w.httpURL},
			{"renormalize", "--dry-run"},
		} {
			if code, out, errOut := runCLI(t, append(args, w.natsArgs()...)...); code != 0 {
				t.Fatalf("%v: %d\n%s%s", args, code, out, errOut)
			}
		}
	}
	if got, got2 := count(substate.StreamEvents), count(substate.StreamDLQ); got != events || got2 != dlq {
		t.Fatalf("consumers: %s %d, %s %d after the commands; want %d and %d", substate.StreamEvents, got, substate.StreamDLQ, got2, events, dlq)
	}
}
