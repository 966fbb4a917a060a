package mapping_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// One client sending 500 distinct bogus states makes one metric series
// per provider: the hook is given the provider only, and every state goes
// to the log, escaped.
func TestUnknownStatesOneSeries(t *testing.T) {
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "unknown_states_total", Help: "test"}, []string{"provider"})
	var logs bytes.Buffer
	m := mapping.New(mapping.Config{
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		OnUnknown: func(p string) { counter.WithLabelValues(p).Inc() },
	})
	for i := range 500 {
		state := fmt.Sprintf("BOGUS_%d\n", i)
		mustMap(t, m, substate.RawEventBridge, sfnEvent(t, state, nil))
	}
	if got := testutil.CollectAndCount(counter); got != 1 {
		t.Fatalf("%d series, want 1", got)
	}
	if got := testutil.ToFloat64(counter.WithLabelValues(string(substate.ProviderStepFunctions))); got != 500 {
		t.Fatalf("counted %v, want 500", got)
	}
	if got := m.Unknown(substate.ProviderStepFunctions); got != 500 {
		t.Fatalf("Unknown() = %d, want 500", got)
	}
	for _, want := range []string{`state="BOGUS_0\n"`, `state="BOGUS_499\n"`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log has no %s", want)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 500 {
		t.Fatalf("%d log lines, want 500 (a state must not break a line)", n)
	}
}
