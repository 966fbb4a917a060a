package reconcile

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
)

// Poll outcomes besides the error codes of substate.
const (
	OutcomeOK            = "ok"             // the status was read and published
	OutcomePublishFailed = "publish_failed" // read, but SUBSTATE_RAW did not take it
)

// Metrics are the Prometheus metrics of the reconciler and the
// Restate admin poller.
type Metrics struct {
	// Polls counts executions asked about, by provider and outcome: "ok",
	// "publish_failed", or the substate error code of the failure
	// ("not_found", "throttled", "unavailable", …).
	Polls *prometheus.CounterVec
	// APICalls counts requests sent to a provider's API, by provider and
	// operation (retried attempts included): the cost of reconciling.
	APICalls *prometheus.CounterVec
	// Stale is how many non-terminal tenants of a provider had no event
	// for longer than the staleness threshold at the last sweep.
	Stale *prometheus.GaugeVec
	// SweepDuration is how long a sweep took, by poller.
	SweepDuration *prometheus.HistogramVec
	// PollLag is, by provider, how late the most overdue execution's poll
	// was at the last sweep: above the poll interval, the provider's API
	// budget does not cover every running execution each interval.
	PollLag *prometheus.GaugeVec
	// Throttled counts the calls a provider answered with throttling, by
	// provider and operation.
	Throttled *prometheus.CounterVec
	// Backoff is, by provider and operation, the wait of the API's current
	// backoff after throttling; 0 when it is not throttled.
	Backoff *prometheus.GaugeVec
	// Behind is, by provider, how many running executions were polled
	// without the detail that shows retries (Step Functions: their history,
	// while GetExecutionHistory backs off) and not read since.
	Behind *prometheus.GaugeVec

	lastSweep atomic.Int64 // Unix nanoseconds at the end of the last sweep; 0 before the first
}

// LastSweep returns when a sweep last ended, of any poller; ok is false
// before the first.
func (m *Metrics) LastSweep() (t time.Time, ok bool) {
	if n := m.lastSweep.Load(); n != 0 {
		return time.Unix(0, n), true
	}
	return time.Time{}, false
}

// NewMetrics creates the metrics and registers them on reg when
// it is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_reconcile_polls_total", Help: "Executions polled by the reconciler, by provider and outcome.",
		}, []string{"provider", "outcome"}),
		APICalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_provider_api_calls_total", Help: "Requests sent to a provider's API by the reconciler, by provider and operation.",
		}, []string{"provider", "operation"}),
		Stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_reconcile_stale_tenants", Help: "Non-terminal tenants without a recent event at the last sweep, by provider.",
		}, []string{"provider"}),
		SweepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "substate_reconcile_sweep_duration_seconds", Help: "Duration of one reconciler sweep.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"poller"}),
		PollLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_reconcile_poll_lag_seconds", Help: "How late the most overdue execution's poll was at the last sweep, by provider.",
		}, []string{"provider"}),
		Throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "substate_provider_api_throttled_total", Help: "Requests a provider's API answered with throttling, by provider and operation.",
		}, []string{"provider", "operation"}),
		Backoff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_provider_api_backoff_seconds", Help: "The current backoff of a throttled provider API (0 when not throttled), by provider and operation.",
		}, []string{"provider", "operation"}),
		Behind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "substate_reconcile_behind_executions", Help: "Running executions polled without their retry detail (history) and not read since, by provider.",
		}, []string{"provider"}),
	}
	if reg != nil {
		reg.MustRegister(m.Polls, m.APICalls, m.Stale, m.SweepDuration, m.PollLag, m.Throttled, m.Backoff, m.Behind)
	}
	return m
}

// The helpers below accept a nil *Metrics.

// CountPolls counts n polls of a provider's executions with an outcome.
func (m *Metrics) CountPolls(p substate.Provider, outcome string, n int) {
	if m != nil && n > 0 {
		m.Polls.WithLabelValues(string(p), outcome).Add(float64(n))
	}
}

// CountCall counts one request sent to a provider's API.
func (m *Metrics) CountCall(p substate.Provider, operation string) {
	if m != nil {
		m.APICalls.WithLabelValues(string(p), operation).Inc()
	}
}

// SetBackoff records the backoff of a provider's API: d > 0 after a
// throttled call (which it counts), 0 when the API answers again.
func (m *Metrics) SetBackoff(p substate.Provider, operation string, d time.Duration) {
	if m == nil {
		return
	}
	if d > 0 {
		m.Throttled.WithLabelValues(string(p), operation).Inc()
	}
	m.Backoff.WithLabelValues(string(p), operation).Set(max(d, 0).Seconds())
}

// SetBehind sets how many of a provider's running executions are behind.
func (m *Metrics) SetBehind(p substate.Provider, n int) {
	if m != nil {
		m.Behind.WithLabelValues(string(p)).Set(float64(n))
	}
}

// SetStale sets how many non-terminal tenants of a provider a sweep found
// stale.
func (m *Metrics) SetStale(p substate.Provider, n int) {
	if m != nil {
		m.Stale.WithLabelValues(string(p)).Set(float64(n))
	}
}

// ObserveSweep records how long a sweep of a poller took, and that it
// ended now.
func (m *Metrics) ObserveSweep(poller string, d time.Duration) {
	if m != nil {
		m.SweepDuration.WithLabelValues(poller).Observe(d.Seconds())
		m.lastSweep.Store(time.Now().UnixNano())
	}
}

func (m *Metrics) setLag(p substate.Provider, d time.Duration) {
	if m != nil {
		m.PollLag.WithLabelValues(string(p)).Set(max(d, 0).Seconds())
	}
}
