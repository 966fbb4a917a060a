package consumers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/ingress"
)

// Metrics are the Prometheus metrics of the pipeline: the stages' and,
// in Ingress, the HTTP ingress's, which count their dead letters on the
// same DeadLettered.
type Metrics struct {
	Ingress       *ingress.Metrics
	Normalized    *prometheus.CounterVec // provider
	DeadLettered  *prometheus.CounterVec // stage, reason
	Naks          *prometheus.CounterVec // stage
	UnknownStates *prometheus.CounterVec // provider (the state goes to the log)
	// UnresolvedRepeats counts, by provider, the raw messages of an
	// execution without tenant already dead-lettered, acknowledged
	// without another dead letter.
	UnresolvedRepeats *prometheus.CounterVec
	Applied           prometheus.Counter
	Unchanged         prometheus.Counter
	Stale             prometheus.Counter
	Redelivered       prometheus.Counter
	Commits           prometheus.Counter
	WrittenBytes      prometheus.Counter
	BatchSize         *prometheus.HistogramVec // stage
	ConsumerLag       *prometheus.GaugeVec     // consumer
	ChangesEmitted    prometheus.Counter
	StreamLosses      prometheus.Counter     // SUBSTATE_EVENTS found not to hold what the view expects
	SLOEvents         *prometheus.CounterVec // slo, outcome (SLOMet, SLOMissed)
}

// NewMetrics creates the metrics and registers them on reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Normalized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_normalized_total", Help: "Canonical events published by the normalizer.",
		}, []string{"provider"}),
		DeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_dead_lettered_total", Help: "Messages sent to SUBSTATE_DLQ by stage and reason code.",
		}, []string{"stage", "reason"}),
		Naks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_naks_total", Help: "Messages handed back for a delayed redelivery after a transient failure.",
		}, []string{"stage"}),
		UnknownStates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_unknown_states_total", Help: "Unknown provider states mapped to running.",
		}, []string{"provider"}),
		UnresolvedRepeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_unresolved_repeats_total",
			Help: "Raw messages of an execution already dead-lettered for having no tenant, acknowledged without another dead letter (SUBSTATE_RAW keeps them).",
		}, []string{"provider"}),
		Applied:        counter("substate_view_applied_total", "Events that changed the tenant view."),
		Unchanged:      counter("substate_view_unchanged_total", "Events skipped because they changed nothing."),
		Stale:          counter("substate_view_stale_total", "Events ignored as older than the view."),
		Redelivered:    counter("substate_view_redelivered_total", "Events at or below the view checkpoint, skipped."),
		Commits:        counter("substate_view_commits_total", "Write transactions committed by the projector."),
		WrittenBytes:   counter("substate_view_written_bytes_total", "Bytes the projector's commits wrote to the view file."),
		ChangesEmitted: counter("substate_changes_published_total", "Messages published on the change feed."),
		StreamLosses:   counter("substate_stream_losses_total", "Times SUBSTATE_EVENTS was found not to hold what the view was built from (recreated, truncated, messages lost)."),
		BatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "substate_batch_size", Help: "Messages per fetched batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}, []string{"stage"}),
		ConsumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_consumer_lag", Help: "Messages not yet delivered to a durable consumer.",
		}, []string{"consumer"}),
		SLOEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_slo_events_total",
			Help: "Deadlines that ended, by SLO (a sub-state or run) and outcome: met (a change ended it before it passed) or missed (it passed: the tenant became stuck).",
		}, []string{"slo", "outcome"}),
	}
	m.Ingress = ingress.NewMetrics(reg, m.DeadLettered)
	if reg != nil {
		reg.MustRegister(m.Normalized, m.DeadLettered, m.Naks,
			m.UnknownStates, m.UnresolvedRepeats, m.Applied, m.Unchanged, m.Stale, m.Redelivered, m.Commits, m.WrittenBytes,
			m.ChangesEmitted, m.StreamLosses, m.BatchSize, m.ConsumerLag, m.SLOEvents)
	}
	return m
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// The helpers below accept a nil *Metrics, so components work without one.

func (m *Metrics) observeBatch(stage string, n int) {
	if m != nil {
		m.BatchSize.WithLabelValues(stage).Observe(float64(n))
	}
}

func (m *Metrics) countNormalized(events []substate.Event) {
	if m == nil {
		return
	}
	for i := range events {
		m.Normalized.WithLabelValues(string(events[i].Data.Provider)).Inc()
	}
}

func (m *Metrics) countNak(stage string) {
	if m != nil {
		m.Naks.WithLabelValues(stage).Inc()
	}
}

func (m *Metrics) countUnresolvedRepeat(p substate.Provider) {
	if m != nil {
		m.UnresolvedRepeats.WithLabelValues(string(p)).Inc()
	}
}

func (m *Metrics) countDeadLetter(stage, code string) {
	if m != nil {
		m.DeadLettered.WithLabelValues(stage, code).Inc()
	}
}
