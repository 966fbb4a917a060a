package replay

import (
	"github.com/prometheus/client_golang/prometheus"
)

// CheckMetrics counts what evidence checks found.
type CheckMetrics struct {
	// Events counts checked events by outcome:
	// substate_evidence_events_total{outcome}. Alert on any increase of
	// the forged and missing outcomes.
	Events *prometheus.CounterVec
}

// NewCheckMetrics registers the evidence check's metrics with reg.
func NewCheckMetrics(reg prometheus.Registerer) *CheckMetrics {
	m := &CheckMetrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_evidence_events_total",
			Help: "Canonical events checked against their raw evidence in SUBSTATE_RAW, by outcome (verified, forged, missing, expired, unverified, invalid).",
		}, []string{"outcome"}),
	}
	for _, o := range CheckOutcomes {
		m.Events.WithLabelValues(o) // every outcome is reported, at 0 until seen
	}
	reg.MustRegister(m.Events)
	return m
}

func (m *CheckMetrics) count(outcome string) {
	if m != nil {
		m.Events.WithLabelValues(outcome).Inc()
	}
}
