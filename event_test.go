package substate_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

func TestEventRoundTrip(t *testing.T) {
	data := substate.EventData{
		TenantID:    "acme",
		Provider:    substate.ProviderRestate,
		ExecutionID: "inv_1",
		SubState:    substate.StateBackingOff,
		RetryCount:  3, RetryCountKnown: true,
		ErrorMessage: "[500] payment provider returned HTTP 503",
		OccurredAt:   time.Date(2024, 6, 19, 10, 0, 47, 0, time.UTC),
		Revision:     1718791247905,
	}
	data.Normalize()
	b, err := substate.MarshalEvent(substate.NewEvent("id-1", data))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("cloudevent lacks %q", k)
		}
	}
	got, err := substate.UnmarshalEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != data {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.Data, data)
	}
	if got.Data.Verb != substate.VerbRetrying || got.Data.Status != substate.StatusRunning || got.Data.Terminal {
		t.Fatalf("normalize: verb %q status %q terminal %v", got.Data.Verb, got.Data.Status, got.Data.Terminal)
	}
}

func TestUnmarshalEventErrors(t *testing.T) {
	tests := map[string]string{
		"NotJSON":       `{`,
		"WrongType":     `{"specversion":"1.0","type":"other","data":{}}`,
		"NoTenant":      `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"executionId":"x","subState":"running","provider":"engine"}}`,
		"BadSubState":   `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"t","executionId":"x","subState":"paused","provider":"engine"}}`,
		"LongTenant":    `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"` + strings.Repeat("a", 257) + `","executionId":"x","subState":"running","provider":"engine"}}`,
		"TenantNewline": `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"a\nb","executionId":"x","subState":"running","provider":"engine"}}`,
		"TenantBadUTF8": `{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"a\udcff","executionId":"x","subState":"running","provider":"engine"}}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := substate.UnmarshalEvent([]byte(in)); err == nil {
				t.Fatal("want error")
			}
		})
	}
}

// FuzzUnmarshalEvent feeds arbitrary bytes to the canonical event decoder:
// it must never panic, its errors carry an application code, and what it
// accepts encodes and decodes back to the same bytes.
func FuzzUnmarshalEvent(f *testing.F) {
	data := substate.EventData{TenantID: "acme", Provider: substate.ProviderEngine, ExecutionID: "x", SubState: substate.StateError}
	data.Normalize()
	good, err := substate.MarshalEvent(substate.NewEvent("id-1", data))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"specversion":"1.0","type":"` + substate.EventType + `","data":{"tenantId":"t","executionId":"x","subState":"paused","provider":"engine"}}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := substate.UnmarshalEvent(b)
		if err != nil {
			if code := substate.ErrorCode(err); code != substate.EINVALID && code != substate.ENOTENANT {
				t.Fatalf("error code %q: %v", code, err)
			}
			return
		}
		once, err := substate.MarshalEvent(e)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		back, err := substate.UnmarshalEvent(once)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v\n%s", err, once)
		}
		if twice, _ := substate.MarshalEvent(back); string(twice) != string(once) {
			t.Fatalf("round trip changed the event:\n%s\n%s", once, twice)
		}
	})
}

// benchEvent is a canonical event as the normalizer publishes a Step
// Functions failure.
func benchEvent() substate.Event {
	data := substate.EventData{
		TenantID: "tenant-4711", Provider: substate.ProviderStepFunctions, Workflow: "provision-tenant",
		ExecutionID: "arn:aws:states:us-east-1:123456789012:execution:provision-tenant:e4711",
		SubState:    substate.StateFailed, ProviderState: "FAILED", ErrorType: "States.TaskFailed",
		ErrorMessage: "quota exceeded for tenant tenant-4711 in eu-west-1",
		OccurredAt:   time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Revision: 2 << 32, // a terminal Step Functions status, as mapping ranks it
	}
	data.Normalize()
	return substate.NewEvent("0123456789abcdef0123456789abcdef", data)
}

// BenchmarkMarshalEvent is the normalizer's cost per canonical event.
func BenchmarkMarshalEvent(b *testing.B) {
	e := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := substate.MarshalEvent(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalEvent is the projector's and the rebuild's cost per
// canonical event.
func BenchmarkUnmarshalEvent(b *testing.B) {
	body, err := substate.MarshalEvent(benchEvent())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := substate.UnmarshalEvent(body); err != nil {
			b.Fatal(err)
		}
	}
}

// Each sub-state's event type is its own, spelled as the contract says,
// and a sub-state outside the list is typed the same way.
func TestEventTypeFor(t *testing.T) {
	for _, tt := range []struct {
		s    substate.SubState
		want string
	}{
		{substate.StateRunning, "io.substate.execution.running.v1"},
		{substate.StateWaiting, "io.substate.execution.waiting.v1"},
		{substate.StateBackingOff, "io.substate.execution.backing-off.v1"},
		{substate.StateError, "io.substate.execution.error.v1"},
		{substate.StateSucceeded, "io.substate.execution.succeeded.v1"},
		{substate.StateFailed, "io.substate.execution.failed.v1"},
		{"paused", "io.substate.execution.paused.v1"},
	} {
		if got := substate.EventTypeFor(tt.s); got != tt.want {
			t.Errorf("EventTypeFor(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
	if got := substate.EventTypes(); len(got) != len(substate.SubStates) || got[2] != "io.substate.execution.backing-off.v1" {
		t.Errorf("EventTypes() = %q", got)
	}
}

// eventSink keeps what a test measures from being optimized away: an event
// that went nowhere would be made on the stack.
var eventSink substate.Event

// An event's source is /substate/<provider>, for a known provider made
// once, not for each event.
func TestNewEventSource(t *testing.T) {
	for _, p := range append(slices.Clone(substate.Providers), "other") {
		data := substate.EventData{Provider: p, SubState: substate.StateRunning}
		if got, want := substate.NewEvent("e-1", data).Source, "/substate/"+string(p); got != want {
			t.Errorf("source of a %s event: %q, want %q", p, got, want)
		}
		if p == "other" {
			continue
		}
		if n := testing.AllocsPerRun(100, func() { eventSink = substate.NewEvent("e-1", data) }); n != 0 {
			t.Errorf("a %s event's source: %v allocations, want 0", p, n)
		}
	}
}
