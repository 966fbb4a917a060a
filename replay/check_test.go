package replay_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
)

// genuine publishes the raw fixtures and the canonical events the mapping
// makes of them, and returns those events as stored.
func genuine(tb testing.TB, b *bus.Bus) []replay.Event {
	tb.Helper()
	publishRawFixtures(tb, b)
	renormalize(tb, newRenormalizer(b, testMapper(tb)), replay.Range{})
	var out []replay.Event
	for e, err := range newReader(b).Events(context.Background(), "", replay.Range{}) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func newChecker(tb testing.TB, b *bus.Bus, reg prometheus.Registerer) *replay.Checker {
	return &replay.Checker{Reader: newReader(b), Mapper: testMapper(tb), EventID: mapping.EventID,
		MappingVersion: mapping.Version, Metrics: replay.NewCheckMetrics(reg)}
}

// forge publishes a canonical event straight on SUBSTATE_EVENTS, as anyone
// with publish rights on the stream can, with the raw link headers given.
func forge(tb testing.TB, b *bus.Bus, msgID string, e substate.Event, raw substate.RawRef) {
	tb.Helper()
	body, err := substate.MarshalEvent(e)
	if err != nil {
		tb.Fatal(err)
	}
	h := map[string]string{substate.HeaderMsgID: msgID}
	if raw.Seq > 0 {
		h[substate.HeaderRawSeq], h[substate.HeaderRawID] = strconv.FormatUint(raw.Seq, 10), raw.ID
	}
	publishMsg(tb, b.JetStream, substate.EventsSubject(e.Data.TenantID), body, h)
}

func check(tb testing.TB, c *replay.Checker) replay.CheckResult {
	tb.Helper()
	res, err := c.Run(context.Background(), replay.Range{})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// Events published by someone holding publish rights on SUBSTATE_EVENTS
// are caught: they have no raw evidence, or it says something else.
func TestCheckCatchesForgedEvents(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	events := genuine(t, b)
	reg := prometheus.NewRegistry()
	c := newChecker(t, b, reg)
	if res := check(t, c); res.Failed() || res.Counts[replay.CheckVerified] != len(events) {
		t.Fatalf("genuine stream: %+v, want %d verified", res.Counts, len(events))
	}

	real := events[0]
	victim := substate.EventData{TenantID: "victim", Provider: substate.ProviderStepFunctions, ExecutionID: "arn:x",
		SubState: substate.StateSucceeded, Revision: 99, OccurredAt: time.Now().UTC().Truncate(time.Millisecond)}
	victim.Normalize()
	forge(t, b, "f1", substate.NewEvent("forged-1", victim), substate.RawRef{}) // the victim: no evidence at all

	altered := real.Event
	altered.Data.SubState, altered.Data.ErrorMessage = substate.StateSucceeded, ""
	altered.Data.Normalize()
	altered.Type = substate.EventTypeFor(altered.Data.SubState) // a forger keeps the event decodable
	forge(t, b, "f2", altered, real.RawRef())                   // a real event's link and id, other content

	ghost := real.Event
	ghost.ID, ghost.Data.TenantID, ghost.Subject = "forged-3", "ghost-tenant", "ghost-tenant"
	forge(t, b, "f3", ghost, real.RawRef()) // a new tenant pinned on real evidence

	forge(t, b, "f4", substate.NewEvent("forged-4", victim), substate.RawRef{Seq: 99999, ID: "raw-1"}) // evidence that never was

	wrongID := real.RawRef()
	wrongID.ID = "another-raw"
	forge(t, b, "f5", real.Event, wrongID) // the link names another message

	moved := real.Event
	publishMsg(t, b.JetStream, substate.EventsSubject("elsewhere"), mustMarshal(t, moved),
		map[string]string{substate.HeaderMsgID: "f6", substate.HeaderRawSeq: strconv.FormatUint(real.RawRef().Seq, 10), substate.HeaderRawID: real.RawRef().ID})

	publishMsg(t, b.JetStream, substate.EventsSubject("x"), []byte("{not an event"), map[string]string{substate.HeaderMsgID: "f7"})

	old := real.Event
	old.ID, old.Data.MappingVersion = "mapped-long-ago", 0
	forge(t, b, "f8", old, real.RawRef()) // an older mapping's event: reported, not failed

	res := check(t, c)
	want := map[string]int{replay.CheckVerified: len(events), replay.CheckForged: 4, replay.CheckMissing: 2,
		replay.CheckInvalid: 1, replay.CheckUnverified: 1}
	for outcome, n := range want {
		if res.Counts[outcome] != n {
			t.Errorf("%s: %d, want %d (counts %v)", outcome, res.Counts[outcome], n, res.Counts)
		}
	}
	if !res.Failed() {
		t.Error("the check did not fail")
	}
	reasons := map[string]string{}
	for _, f := range res.Findings {
		reasons[f.TenantID+"/"+f.Outcome] += f.Reason + ";"
	}
	for key, part := range map[string]string{
		"victim/missing":                     "no raw link",
		"ghost-tenant/forged":                "not one of",
		real.Event.Data.TenantID + "/forged": "workflowSubState",
	} {
		if !strings.Contains(reasons[key], part) {
			t.Errorf("%s: reasons %q, want one with %q", key, reasons[key], part)
		}
	}
	if got := testutil.ToFloat64(c.Metrics.Events.WithLabelValues(replay.CheckForged)); got != 4 {
		t.Errorf("forged metric %v, want 4", got)
	}
	if got := testutil.ToFloat64(c.Metrics.Events.WithLabelValues(replay.CheckVerified)); got != float64(2*len(events)) {
		t.Errorf("verified metric %v, want %d over both checks", got, 2*len(events))
	}
}

// An event whose raw message retention removed is expired, unless it was
// stored well after the raw stream's oldest message: then it is missing.
func TestCheckExpiredEvidence(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	events := genuine(t, b)
	ctx := context.Background()
	s, err := b.JetStream.Stream(ctx, substate.StreamRaw)
	if err != nil {
		t.Fatal(err)
	}
	first := events[0].RawRef().Seq
	if err := s.DeleteMsg(ctx, first); err != nil {
		t.Fatal(err)
	}
	c := newChecker(t, b, prometheus.NewRegistry())
	res := check(t, c)
	if res.Counts[replay.CheckExpired] == 0 || res.Failed() {
		t.Fatalf("counts %v, want expired events and no failure", res.Counts)
	}
	c.ClockSlack = time.Nanosecond
	if res := check(t, c); res.Counts[replay.CheckMissing] == 0 || !res.Failed() {
		t.Fatalf("without slack: counts %v, want missing events", res.Counts)
	}
}

func mustMarshal(tb testing.TB, e substate.Event) []byte {
	tb.Helper()
	b, err := substate.MarshalEvent(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
