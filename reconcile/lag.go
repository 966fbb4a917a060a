package reconcile

import (
	"time"

	"github.com/substatehq/substate"
)

// measureLag sets the lag metric of each provider, how late its most
// overdue execution is, notes when the next execution is due, and logs
// when a provider starts or stops lagging by more than Every.
func (r *Reconciler) measureLag() {
	now := r.Now()
	lag := map[substate.Provider]time.Duration{}
	r.nextDue = now.Add(r.Interval)
	for k, t := range r.tracked {
		if t.gaveUp != "" {
			continue
		}
		late := t.firstSeen
		if !t.lastPoll.IsZero() {
			late = t.lastPoll.Add(r.Every)
		}
		lag[k.provider] = max(lag[k.provider], now.Sub(late))
		next := t.firstSeen
		if !t.lastTry.IsZero() {
			next = t.lastTry.Add(r.Every)
		}
		if h := r.holds[k.provider]; h != nil && h.until.After(next) {
			next = h.until
		}
		if next.Before(r.nextDue) {
			r.nextDue = next
		}
	}
	for p := range r.Pollers {
		r.Metrics.setLag(p, lag[p])
		if late := lag[p] > r.Every; late != r.lagging[p] {
			r.lagging[p] = late
			if late {
				r.logger().Warn("polls lag: the provider's API budget does not cover every running execution each interval; they are polled in turn",
					"provider", string(p), "lag", lag[p].Round(time.Second), "every", r.Every)
			} else {
				r.logger().Info("polls keep up again", "provider", string(p))
			}
		}
	}
}

// wait is how long Run sleeps after a sweep that took took: until the next
// execution is due, at most Interval and at least a short pause.
func (r *Reconciler) wait(took time.Duration) time.Duration {
	d := min(r.nextDue.Sub(r.Now()), r.Interval-took)
	if r.nextDue.IsZero() {
		d = r.Interval - took
	}
	return max(d, minSweepWait)
}
