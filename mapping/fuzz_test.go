package mapping_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// fuzzMap feeds arbitrary bytes to the decoder of kind: it must never panic,
// every error must carry an application code, and every event it does
// return must be valid.
func fuzzMap(f *testing.F, kind substate.RawKind, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"rows":null}`))
	m := mapping.New(mapping.Config{Tenants: testRules(f)})
	f.Fuzz(func(t *testing.T, body []byte) {
		checkMapped(t, m, substate.RawEvent{Kind: kind, ID: "fuzz", Body: body})
	})
}

// checkMapped maps raw: it must not panic, an error must carry an
// application code, and every event returned must be valid, with a next
// retry time only when it is backing-off and not from Step Functions.
func checkMapped(t *testing.T, m *mapping.Mapper, raw substate.RawEvent) {
	t.Helper()
	evs, err := m.Map(raw)
	if err != nil {
		if code := substate.ErrorCode(err); code != substate.EINVALID && code != substate.ENOTENANT {
			t.Fatalf("error code %q: %v", code, err)
		}
		return
	}
	if len(evs) == 0 {
		t.Fatal("no events and no error")
	}
	for _, ev := range evs {
		if err := ev.Validate(); err != nil {
			t.Fatalf("invalid event %+v: %v", ev, err)
		}
		if !ev.Verb.Valid() || ev.Status == "" || ev.Provider != raw.Kind.Provider() || ev.RetryCount < 0 {
			t.Fatalf("incomplete event %+v", ev)
		}
		if !ev.NextRetryAt.IsZero() && (ev.SubState != substate.StateBackingOff || ev.Provider == substate.ProviderStepFunctions) {
			t.Fatalf("a next retry time on a %s %s event: %+v", ev.Provider, ev.SubState, ev)
		}
	}
}

func FuzzEventBridge(f *testing.F) {
	var seeds [][]byte
	for _, n := range fixtureNames(f, "sfn-status-*.json") {
		seeds = append(seeds, fixture(f, n))
	}
	fuzzMap(f, substate.RawEventBridge, seeds...)
}

func FuzzPoll(f *testing.F) {
	fuzzMap(f, substate.RawStepFunctionsPoll,
		pollPayload(f, fixture(f, "sfn-describe-execution-failed.json"), fixture(f, "sfn-history-retry.json")),
		backingOffPoll(f))
}

func FuzzRestate(f *testing.F) {
	var seeds [][]byte
	for _, n := range fixtureNames(f, "restate-invocation-*.json") {
		seeds = append(seeds, fixture(f, n))
	}
	fuzzMap(f, substate.RawRestate, append(seeds, restateRow(f, "paused", map[string]any{"modified_at": 1718791247905}),
		restateRow(f, "paused", map[string]any{"sys_journal_events": journal(f, "P:a", "P:b"),
			"handler_retry_policy": map[string]any{"max_attempts": 9_000_000_000_000_000_000, "on_max_attempts": "Pause"}}))...)
}

func FuzzEngine(f *testing.F) {
	fuzzMap(f, substate.RawEngine, engineEvent(f, "error"), engineEvent(f, "teleporting"),
		[]byte(`{"specversion":"1.0","subject":"acme","time":"2026-11-01T10:00:00Z","data":`+string(engineEvent(f, "running"))+`}`))
}

// FuzzEngineBinaryCloudEvent feeds engine events in CloudEvents binary
// mode: arbitrary ce-* attribute headers around an arbitrary body.
func FuzzEngineBinaryCloudEvent(f *testing.F) {
	bare := []byte(`{"executionId":"acme-1","workflow":"provision","seq":3,"status":"error","error":"quota"}`)
	f.Add("1.0", "acme-1/3", "acme", "2026-11-01T10:00:00.000Z", bare)
	f.Add("1.0", "", "", "", engineEvent(f, "running"))
	f.Add("0.3", "x", "acme", "2026-11-01T10:00:00Z", bare)
	f.Add("1.0", "x", "acme", "yesterday", bare)
	f.Add("1.0", "x", "a.b c*>", "2026-11-01T10:00:00+02:00", bare)
	m := mapping.New(mapping.Config{Tenants: testRules(f)})
	f.Fuzz(func(t *testing.T, spec, id, subject, at string, body []byte) {
		header := map[string]string{"ce-specversion": spec, "ce-id": id, "ce-subject": subject, "ce-time": at}
		checkMapped(t, m, substate.RawEvent{Kind: substate.RawEngine, ID: "fuzz", Body: body, Header: header})
	})
}

func FuzzParseHistory(f *testing.F) {
	f.Add(fixture(f, "sfn-history-retry.json"))
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := mapping.ParseHistory(body)
		if err != nil {
			return
		}
		if h.RetryCount < 0 || h.RetryCount > h.Events {
			t.Fatalf("retry count %d of %d events", h.RetryCount, h.Events)
		}
	})
}

func FuzzParseTenantRule(f *testing.F) {
	for _, s := range []string{"input:$.tenantId", "name:^(?P<tenant>[a-z]+)--", "restate:key", "engine", "input:$[?@.a]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := mapping.ParseTenantRule(s)
		if err != nil {
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("error code %q: %v", substate.ErrorCode(err), err)
			}
			return
		}
		if _, err := mapping.ParseTenantRule(r.String()); err != nil {
			t.Fatalf("rule %q does not parse back: %v", r, err)
		}
	})
}

func TestEventID(t *testing.T) {
	raw := substate.RawEvent{Kind: substate.RawEventBridge, ID: "ev-1"}
	a, b := mapping.EventID(raw, 0), mapping.EventID(raw, 0)
	if a != b || len(a) != 64 {
		t.Fatalf("EventID not deterministic hex sha-256: %q %q", a, b)
	}
	others := []string{
		mapping.EventID(raw, 1),
		mapping.EventID(substate.RawEvent{Kind: substate.RawRestate, ID: "ev-1"}, 0),
		mapping.EventID(substate.RawEvent{Kind: substate.RawEventBridge, ID: "ev-2"}, 0),
	}
	for _, o := range others {
		if o == a {
			t.Errorf("EventID collides: %q", o)
		}
	}
}

// An event id is the hex SHA-256 of the raw kind, the raw id, the index
// and the mapping version, NUL-separated: ids stored by any earlier build
// are asked again by the evidence check, so the bytes hashed never change.
// Version 0 (events from before they carried it) is version 1.
func TestEventIDPinned(t *testing.T) {
	for _, tt := range []struct {
		raw            substate.RawEvent
		index, version int
		want           string
	}{
		{substate.RawEvent{Kind: substate.RawEventBridge, ID: "ev-1"}, 0, 5, "4377c1e394c2a3bb96a3071d83d7630e4ba9aebdf3d973dde3d071878e006b7d"},
		{substate.RawEvent{Kind: substate.RawRestate, ID: "inv_1abc"}, 2, 0, "246beccae5c1ed50a86445a4839928cca8f0fe4dbe74c982fa6138724243dcef"},
		{substate.RawEvent{Kind: substate.RawRestate, ID: "inv_1abc"}, 2, 1, "246beccae5c1ed50a86445a4839928cca8f0fe4dbe74c982fa6138724243dcef"},
	} {
		if got := mapping.EventIDOf(tt.raw, tt.index, tt.version); got != tt.want {
			t.Errorf("EventIDOf(%q, %q, %d, %d) = %s, want %s", tt.raw.Kind, tt.raw.ID, tt.index, tt.version, got, tt.want)
		}
	}
}

// FuzzEventID holds EventIDOf to the streaming hash it replaced, for ids
// short enough to hash on the stack and long ones alike.
func FuzzEventID(f *testing.F) {
	f.Add("stepfunctions.eventbridge", "ev-1", 0, 5)
	f.Add("restate.invocation", strings.Repeat("x", 300), -1, -7)
	f.Add("", "", 1<<40, 1<<62)
	f.Fuzz(func(t *testing.T, kind, id string, index, version int) {
		raw := substate.RawEvent{Kind: substate.RawKind(kind), ID: id}
		if got, want := mapping.EventIDOf(raw, index, version), streamedEventID(raw, index, version); got != want {
			t.Fatalf("EventIDOf(%q, %q, %d, %d) = %s, the streamed hash %s", kind, id, index, version, got, want)
		}
	})
}

// streamedEventID is EventIDOf as it was first written: a streaming
// hash.Hash written part by part.
func streamedEventID(raw substate.RawEvent, index, version int) string {
	version = max(version, 1)
	h := sha256.New()
	h.Write([]byte(raw.Kind))
	h.Write([]byte{0})
	h.Write([]byte(raw.ID))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(index), 10))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(version), 10))
	return hex.EncodeToString(h.Sum(nil))
}

// BenchmarkEventID is the normalizer's cost of naming each canonical event.
func BenchmarkEventID(b *testing.B) {
	raw := substate.RawEvent{Kind: substate.RawEventBridge, ID: "6a7e8feb-b491-4cf7-a9f1-bf3703467718"}
	b.ReportAllocs()
	for b.Loop() {
		_ = mapping.EventID(raw, 0)
	}
}
