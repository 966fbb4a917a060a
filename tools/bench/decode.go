package bench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/mapping"
)

// decodeResult is the cost of decoding and mapping one provider payload,
// what the normalizer does for every raw event.
type decodeResult struct {
	Kind           substate.RawKind `json:"kind"`
	Bytes          int              `json:"bytes"`
	NsPerEvent     float64          `json:"nsPerEvent"`
	AllocsPerEvent float64          `json:"allocsPerEvent"`
}

// decodePayloads returns a realistic payload of every raw kind: the bench's
// own EventBridge event, the reconciler's poll, a Restate row and an engine
// event.
func decodePayloads(load benchLoad) ([]substate.RawEvent, error) {
	var describe map[string]any
	if err := json.Unmarshal(fixtures.Provider("sfn-describe-execution-failed.json"), &describe); err != nil {
		return nil, err
	}
	describe["input"] = `{"tenantId":"acme","orderId":"ord-2024-000124"}` // the fixture's input names no tenant
	poll, err := json.Marshal(map[string]any{
		"execution": describe,
		"history":   json.RawMessage(fixtures.Provider("sfn-history-retry.json")),
		"polledAt":  time.Date(2024, 6, 19, 10, 1, 5, 0, time.UTC),
	})
	if err != nil {
		return nil, err
	}
	engine, err := json.Marshal(substate.EngineEvent{
		ID: "acme-1/3", TenantID: "acme", ExecutionID: "acme-1", Workflow: "provision", Seq: 3,
		Status: substate.EngineBackingOff, State: "CreateDatabase", Attempt: 2, RetryCount: 1,
		ErrorType: "ServiceUnavailable", Error: "database api answered 503", StartedAt: load.start, Time: load.start.Add(time.Second),
	})
	if err != nil {
		return nil, err
	}
	return []substate.RawEvent{
		load.raw(benchEvent{tenant: 1, exec: 1, status: "FAILED"}, nil),
		{Kind: substate.RawStepFunctionsPoll, ID: "poll", Body: poll},
		{Kind: substate.RawRestate, ID: "restate", Body: fixtures.Provider("restate-invocation-backing-off.json")},
		{Kind: substate.RawEngine, ID: "engine", Body: engine},
	}, nil
}

// measureDecode maps each payload over and over for about d and returns the
// time and allocations per event.
func measureDecode(load benchLoad, d time.Duration) ([]decodeResult, error) {
	payloads, err := decodePayloads(load)
	if err != nil {
		return nil, err
	}
	rules, err := mapping.ParseTenantRules()
	if err != nil {
		return nil, err
	}
	m := mapping.New(mapping.Config{Tenants: rules})
	var out []decodeResult
	for _, raw := range payloads {
		if _, err := m.Map(raw); err != nil {
			return nil, fmt.Errorf("bench: map %s: %w", raw.Kind, err)
		}
		n, allocs0, start := 0, mallocs(), time.Now()
		for time.Since(start) < d {
			for range 100 {
				_, _ = m.Map(raw)
			}
			n += 100
		}
		elapsed := time.Since(start)
		out = append(out, decodeResult{
			Kind: raw.Kind, Bytes: len(raw.Body),
			NsPerEvent:     float64(elapsed.Nanoseconds()) / float64(n),
			AllocsPerEvent: float64(mallocs()-allocs0) / float64(n),
		})
	}
	return out, nil
}
