package worker

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
)

var t0 = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

func TestCompareStream(t *testing.T) {
	s := eventsStream{mark: "2026-11-01T10:00:00Z", first: 1, last: 500}
	for _, c := range []struct {
		name string
		mark string
		cp   uint64
		s    eventsStream
		want string // "" means no loss
	}{
		{"Matches", s.mark, 500, s, ""},
		{"Behind", s.mark, 10, s, ""},
		{"NoMarkYet", "", 500, s, ""},
		{"NewView", "", 0, eventsStream{mark: s.mark, first: 90, last: 500}, ""},
		{"Recreated", "2026-10-01T00:00:00Z", 20, s, "deleted and created again"},
		{"Truncated", s.mark, 800, s, "sequences 501 to 800 are gone"},
		{"TrimmedUnapplied", s.mark, 10, eventsStream{mark: s.mark, first: 40, last: 500}, "sequences 11 to 39 were removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			loss := compareStream(c.mark, c.cp, c.s)
			switch {
			case c.want == "" && loss != nil:
				t.Fatalf("loss %q, want none", loss)
			case c.want != "" && (loss == nil || !strings.Contains(loss.Error(), c.want)):
				t.Fatalf("loss %v, want %q", loss, c.want)
			}
		})
	}
}

// While running, sequences the view never applied that vanish from the
// stream (a purge, retention outrunning the projector) are said once and
// counted; the worker goes on, since nothing brings them back. A stream
// created again under it is fatal.
func TestCompareRunning(t *testing.T) {
	ctx := context.Background()
	b := bustest.Open(t)
	view := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	if err := view.Open(); err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	w := &Worker{Bus: b, View: view, Metrics: consumers.NewMetrics(nil), Logger: slog.New(slog.DiscardHandler)}
	d := substate.EventData{TenantID: "t", Provider: substate.ProviderEngine, ExecutionID: "run-1", SubState: substate.StateRunning,
		Revision: 1, OccurredAt: t0, ExecutionStartedAt: t0}
	d.Normalize()
	if _, err := view.Apply(ctx, []substate.Sequenced{{Seq: 2, Event: d}}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.JetStream.Publish(ctx, substate.EventsSubject(fmt.Sprint("t", i)), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := readEventsStream(ctx, b.JetStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.SetStreamMark(s.mark); err != nil {
		t.Fatal(err)
	}
	stream, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(7)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.compareRunning(ctx); err != nil {
			t.Fatalf("a gap: %v, want the worker to go on", err)
		}
	}
	if got := testutil.ToFloat64(w.Metrics.StreamLosses); got != 1 {
		t.Fatalf("substate_stream_losses_total %v after one gap seen twice, want 1", got)
	}
	if err := view.SetStreamMark("2020-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	if err := w.compareRunning(ctx); err == nil || !strings.Contains(err.Error(), "deleted and created again") {
		t.Fatalf("another stream under the view: %v, want fatal", err)
	}
}
