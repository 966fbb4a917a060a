package consumers

import (
	"time"

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
	// DeadlinesHeld counts the times the deadline loop held due deadlines
	// back because it could not read how far the normalizer had come.
	DeadlinesHeld prometheus.Counter
	// Freshness is, by provider, how long after the provider's own time
	// of an event (its occurredAt) the view committed the change it made.
	Freshness *prometheus.HistogramVec
	// LastApplied is when the projector last applied a batch to the view
	// (Unix seconds); ChangesLastPublished when the change feed last
	// stored changes on SUBSTATE_CHANGES.
	LastApplied          prometheus.Gauge
	ChangesLastPublished prometheus.Gauge
	// ConsumerAges is each durable consumer's lag as a time: the age of
	// its oldest unprocessed message.
	ConsumerAges *ConsumerAges

	freshness map[substate.Provider]prometheus.Observer // Freshness's children, without a label lookup per change
}

// FreshnessBuckets are the buckets of substate_view_freshness_seconds: a
// pushed event takes well under a second, a polled one up to its poll
// interval (15 s by default), and the reconciler's finds of a missed push
// minutes. The alert rules in deploy/ count changes slower than 60 s.
var FreshnessBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400}

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
		DeadlinesHeld:  counter("substate_deadlines_held_total", "Times the deadline loop fired nothing due because it could not read how far the normalizer has come in SUBSTATE_RAW (its consumer's info or the first message it has not acknowledged); it tries again every second."),
		BatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "substate_batch_size", Help: "Messages per fetched batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}, []string{"stage"}),
		ConsumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_consumer_lag", Help: "Messages not yet delivered to a durable consumer.",
		}, []string{"consumer"}),
		SLOEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_slo_events_total",
			Help: "Deadlines that ended, by SLO (a sub-state or run) and outcome: met (a change ended it before it passed, by the provider's time of the event) or missed (it passed with no change: the tenant became stuck, or its change occurred after it).",
		}, []string{"slo", "outcome"}),
		Freshness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "substate_view_freshness_seconds", Help: "Time from the provider's own time of an event (its occurredAt: Step Functions' start, redrive or stop date, Restate's modified_at, the engine's emission) to the view's commit of the change it made, by provider.",
			Buckets: FreshnessBuckets,
		}, []string{"provider"}),
		LastApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "substate_view_last_applied_timestamp_seconds", Help: "When the projector last applied a batch of events to the view (Unix time).",
		}),
		ChangesLastPublished: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "substate_change_feed_last_published_timestamp_seconds", Help: "When the change feed last stored changes on SUBSTATE_CHANGES (Unix time).",
		}),
	}
	m.ConsumerAges = &ConsumerAges{}
	m.freshness = make(map[substate.Provider]prometheus.Observer, len(substate.Providers))
	for _, p := range substate.Providers {
		m.freshness[p] = m.Freshness.WithLabelValues(string(p)) // every provider is reported, empty until seen
	}
	m.Ingress = ingress.NewMetrics(reg, m.DeadLettered)
	if reg != nil {
		reg.MustRegister(m.Normalized, m.DeadLettered, m.Naks,
			m.UnknownStates, m.UnresolvedRepeats, m.Applied, m.Unchanged, m.Stale, m.Redelivered, m.Commits, m.WrittenBytes,
			m.ChangesEmitted, m.StreamLosses, m.DeadlinesHeld, m.BatchSize, m.ConsumerLag, m.SLOEvents,
			m.Freshness, m.LastApplied, m.ChangesLastPublished, m.ConsumerAges)
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

// observeApplied records a batch the view applied at now: when, and the
// freshness of each change it made, but not of the changes of sequences
// up to history (a view filling from nothing, see Projector.HistoryUpTo).
func (m *Metrics) observeApplied(changes []substate.Change, now time.Time, history uint64) {
	if m == nil {
		return
	}
	m.LastApplied.Set(float64(now.UnixNano()) / 1e9)
	for i := range changes {
		c := &changes[i]
		if c.Seq <= history || c.New.LastEventAt.IsZero() {
			continue
		}
		if o := m.freshness[c.New.Provider]; o != nil {
			o.Observe(max(now.Sub(c.New.LastEventAt).Seconds(), 0)) // a provider clock ahead of ours is 0
		}
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
