package substate_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
)

func TestSLOsDeadline(t *testing.T) {
	s, err := substate.NewSLOs(map[string]substate.SLOLimits{
		"*":       {substate.SLOBackingOff: 10 * time.Minute, substate.SLORun: 2 * time.Hour},
		"billing": {substate.SLORunning: 30 * time.Minute, substate.SLOBackingOff: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		wt      string
		ss      substate.SubState
		since   time.Time
		started time.Time
		want    time.Time
		slo     substate.SLO
	}{
		{"Default", "ledger", substate.StateBackingOff, t0, t0, t0.Add(10 * time.Minute), substate.SLOBackingOff},
		{"RunEarlier", "ledger", substate.StateBackingOff, t0, t0.Add(-115 * time.Minute), t0.Add(5 * time.Minute), substate.SLORun},
		{"TieIsTheSubState", "ledger", substate.StateBackingOff, t0, t0.Add(-110 * time.Minute), t0.Add(10 * time.Minute), substate.SLOBackingOff},
		{"TypeOwn", "billing", substate.StateRunning, t0, t0, t0.Add(30 * time.Minute), substate.SLORunning},
		{"TypeZeroOverridesDefault", "billing", substate.StateBackingOff, t0, t0, t0.Add(2 * time.Hour), substate.SLORun},
		{"NoSLOForSubState", "ledger", substate.StateWaiting, t0, time.Time{}, time.Time{}, ""},
		{"UnknownSince", "ledger", substate.StateBackingOff, time.Time{}, time.Time{}, time.Time{}, ""},
		{"Terminal", "ledger", substate.StateFailed, t0, t0, time.Time{}, ""},
		{"NoSubState", "ledger", "", t0, t0, time.Time{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, slo := s.Deadline(c.wt, c.ss, c.since, c.started)
			if !got.Equal(c.want) || slo != c.slo {
				t.Fatalf("Deadline = %s %q, want %s %q", got, slo, c.want, c.slo)
			}
		})
	}
	var none *substate.SLOs
	if at, _ := none.Deadline("x", substate.StateRunning, t0, t0); !at.IsZero() || none.Digest() != "" {
		t.Fatal("nil SLOs set a deadline")
	}
}

func TestNewSLOsRefuses(t *testing.T) {
	for name, e := range map[string]substate.SLOLimits{
		"Unknown":  {"stalled": time.Hour},
		"Terminal": {"failed": time.Hour},
		"Negative": {substate.SLORun: -time.Second},
		"TooFine":  {substate.SLORun: time.Millisecond},
		"TooLong":  {substate.SLORun: substate.MaxSLODuration + 1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := substate.NewSLOs(map[string]substate.SLOLimits{"x": e}); substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("NewSLOs = %v, want EINVALID", err)
			}
		})
	}
}

// Equal SLOs have equal digests, whatever the order they were given in;
// any change of a limit changes it.
func TestSLOsDigest(t *testing.T) {
	a, _ := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLORun: time.Hour}, "b": {substate.SLOError: time.Minute}})
	b, _ := substate.NewSLOs(map[string]substate.SLOLimits{"b": {substate.SLOError: time.Minute}, "*": {substate.SLORun: time.Hour}})
	c, _ := substate.NewSLOs(map[string]substate.SLOLimits{"*": {substate.SLORun: time.Hour}, "b": {substate.SLOError: 2 * time.Minute}})
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || a.Digest() == "" {
		t.Fatalf("digests %q %q %q", a.Digest(), b.Digest(), c.Digest())
	}
}
