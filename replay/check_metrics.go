package replay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CheckMetrics counts what evidence checks found.
type CheckMetrics struct {
	// Events counts checked events by outcome:
	// substate_evidence_events_total{outcome}. Alert on any increase of
	// the forged and missing outcomes.
	Events *prometheus.CounterVec
	// Seconds counts the time checks worked, the waits of their budget
	// left out: substate_evidence_check_seconds_total. Its rate is the
	// share of a core the check takes.
	Seconds prometheus.Counter
}

// NewCheckMetrics registers the evidence check's metrics with reg.
func NewCheckMetrics(reg prometheus.Registerer) *CheckMetrics {
	m := &CheckMetrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_evidence_events_total",
			Help: "Canonical events checked against their raw evidence in SUBSTATE_RAW, by outcome (verified, forged, missing, expired, unverified, invalid).",
		}, []string{"outcome"}),
		Seconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "substate_evidence_check_seconds_total",
			Help: "Time evidence checks spent working (reading raw evidence, mapping it again, comparing), not counting the waits of their budget: its rate is the share of one core the check takes.",
		}),
	}
	for _, o := range CheckOutcomes {
		m.Events.WithLabelValues(o) // every outcome is reported, at 0 until seen
	}
	reg.MustRegister(m.Events, m.Seconds)
	return m
}

func (m *CheckMetrics) work(d time.Duration) {
	if m != nil {
		m.Seconds.Add(d.Seconds())
	}
}

func (m *CheckMetrics) count(outcome string) {
	if m != nil {
		m.Events.WithLabelValues(outcome).Inc()
	}
}
