package main

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSweepWatch(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "substate_reconcile_sweep_duration_seconds"}, []string{"poller"})
	reg.MustRegister(h)
	s := &sweepWatch{reg: reg}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.check(t0)
	if _, ok := s.last(); ok {
		t.Fatal("a sweep reported before any")
	}
	h.WithLabelValues("stepfunctions").Observe(0.1)
	s.check(t0.Add(time.Second))
	s.check(t0.Add(2 * time.Second)) // no new sweep: the time stays
	if got, ok := s.last(); !ok || !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("last sweep %v %v, want %v", got, ok, t0.Add(time.Second))
	}
	h.WithLabelValues("restate").Observe(0.1)
	s.check(t0.Add(3 * time.Second))
	if got, _ := s.last(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("last sweep %v after a second poller's sweep", got)
	}
}
