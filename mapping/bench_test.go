package mapping_test

import (
	"testing"

	"github.com/substatehq/substate"
)

func benchMap(b *testing.B, kind substate.RawKind, body []byte) {
	m := newMapper(b)
	raw := substate.RawEvent{Kind: kind, ID: "bench", Body: body}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := m.Map(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMapEventBridge(b *testing.B) {
	benchMap(b, substate.RawEventBridge, fixture(b, "sfn-status-failed.json"))
}

func BenchmarkMapPoll(b *testing.B) {
	benchMap(b, substate.RawStepFunctionsPoll,
		pollPayload(b, fixture(b, "sfn-describe-execution-failed.json"), fixture(b, "sfn-history-retry.json")))
}

func BenchmarkMapRestate(b *testing.B) {
	benchMap(b, substate.RawRestate, fixture(b, "restate-invocation-backing-off.json"))
}

func BenchmarkMapEngine(b *testing.B) {
	benchMap(b, substate.RawEngine, engineEvent(b, "backing-off"))
}
