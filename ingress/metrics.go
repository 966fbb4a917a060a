package ingress

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of the ingress.
type Metrics struct {
	Ingested      *prometheus.CounterVec   // provider, outcome
	IngestLatency *prometheus.HistogramVec // provider
	DeadLettered  *prometheus.CounterVec   // stage, reason; shared with the pipeline's stages
	Throttled     prometheus.Counter       // ingest requests refused by admission control (429)
}

// NewMetrics creates the metrics of the ingress, which counts its dead
// letters on deadLettered, and registers the others on reg when it is not
// nil.
func NewMetrics(reg prometheus.Registerer, deadLettered *prometheus.CounterVec) *Metrics {
	m := &Metrics{
		Ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_ingested_total", Help: "Ingest requests by provider and outcome.",
		}, []string{"provider", "outcome"}),
		IngestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "substate_ingest_duration_seconds", Help: "Ingest request duration until the JetStream ack.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"provider"}),
		DeadLettered: deadLettered,
		Throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "substate_ingest_throttled_total", Help: "Ingest requests answered 429 because the raw backlog or the publishes in flight passed their bound.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Ingested, m.IngestLatency, m.Throttled)
	}
	return m
}

// The helpers below accept a nil *Metrics, so the ingress works without one.

func (m *Metrics) countDeadLetter(stage, code string) {
	if m != nil && m.DeadLettered != nil {
		m.DeadLettered.WithLabelValues(stage, code).Inc()
	}
}

func (m *Metrics) countThrottled() {
	if m != nil {
		m.Throttled.Inc()
	}
}
