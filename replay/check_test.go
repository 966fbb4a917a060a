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
	return &replay.Checker{Reader: newReader(b), Mapper: testMapper(tb), EventID: mapping.EventID, EventIDOf: mapping.EventIDOf,
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

	// The forgery: a copy of a genuine event with a new id, that
	// claims an older mapping version, which this binary cannot repeat.
	old := altered
	old.ID, old.Data.MappingVersion = "mapped-long-ago", 1
	forge(t, b, "f8", old, real.RawRef())

	// The same with the id the genuine event had under version 1: the
	// current mapping of its raw message says another sub-state.
	v1 := olderID(t, b, real, 1)
	oldState := altered
	oldState.ID, oldState.Data.MappingVersion = v1, 1
	forge(t, b, "f9", oldState, real.RawRef())

	// The genuine event as version 1 mapped it: it cannot be derived
	// again exactly, but says what its raw message says.
	genuineOld := real.Event
	genuineOld.ID, genuineOld.Data.MappingVersion, genuineOld.Data.RetryCount = v1, 1, 5
	forge(t, b, "f10", genuineOld, real.RawRef())

	res := check(t, c)
	want := map[string]int{replay.CheckVerified: len(events), replay.CheckForged: 6, replay.CheckMissing: 2,
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
	for _, want := range []struct{ key, part string }{
		{"victim/missing", "no raw link"},
		{"ghost-tenant/forged", "not one of"},
		{real.Event.Data.TenantID + "/forged", "workflowSubState"},
		{real.Event.Data.TenantID + "/forged", "claims mapping version 1, but its id is not one"},
		{real.Event.Data.TenantID + "/forged", "claims mapping version 1, and its raw message says otherwise: subState"},
		{real.Event.Data.TenantID + "/unverified", "mapped by mapping version 1"},
	} {
		if !strings.Contains(reasons[want.key], want.part) {
			t.Errorf("%s: reasons %q, want one with %q", want.key, reasons[want.key], want.part)
		}
	}
	if got := testutil.ToFloat64(c.Metrics.Events.WithLabelValues(replay.CheckForged)); got != 6 {
		t.Errorf("forged metric %v, want 6", got)
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

// olderID returns the id e had under mapping version v.
func olderID(tb testing.TB, b *bus.Bus, e replay.Event, v int) string {
	tb.Helper()
	m, err := newReader(b).Get(context.Background(), substate.StreamRaw, e.RawRef().Seq)
	if err != nil {
		tb.Fatal(err)
	}
	raw := replay.RawEventOf(m)
	for i := range 16 {
		if mapping.EventID(raw, i) == e.Event.ID {
			return mapping.EventIDOf(raw, i, v)
		}
	}
	tb.Fatalf("event %s is none of its raw message's", e.Event.ID)
	return ""
}

// An event of another mapping version that its raw message still agrees
// with is a failure of the check by default (it cannot be derived again
// exactly), and none when the check accepts such events.
func TestCheckUnverifiedFailsUnlessAccepted(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	events := genuine(t, b)
	real := events[0]
	old := real.Event
	old.ID, old.Data.MappingVersion = olderID(t, b, real, 1), 1
	forge(t, b, "v1", old, real.RawRef())
	c := newChecker(t, b, prometheus.NewRegistry())
	if res := check(t, c); res.Counts[replay.CheckUnverified] != 1 || !res.Failed() {
		t.Fatalf("by default: counts %v, failed %v; want 1 unverified and a failure", res.Counts, res.Failed())
	}
	c.AcceptUnverified = true
	if res := check(t, c); res.Counts[replay.CheckUnverified] != 1 || res.Failed() {
		t.Fatalf("accepting them: counts %v, failed %v; want 1 unverified and no failure", res.Counts, res.Failed())
	}
}
