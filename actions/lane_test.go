package actions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/timex"
)

// TestLaneBackoff: a throttled answer starts the lane's backoff; those
// answered while it runs (sent before it) do not lengthen it; one after it
// ended doubles it; an answer that is not throttled resets it, and no
// answer (unavailable, a cancelled call) says nothing.
func TestLaneBackoff(t *testing.T) {
	throttled := substate.Errorf(substate.ETHROTTLED, "rate exceeded")
	for _, tt := range []struct {
		name      string
		answers   []error // noted in turn
		endFirst  bool    // the backoff ended before the last answer
		throttles int
	}{
		{name: "First", answers: []error{throttled}, throttles: 1},
		{name: "DuringBackoff", answers: []error{throttled, throttled, throttled}, throttles: 1},
		{name: "AfterBackoff", answers: []error{throttled, throttled}, endFirst: true, throttles: 2},
		{name: "AnsweredResets", answers: []error{throttled, nil}, throttles: 0},
		{name: "RefusedResets", answers: []error{throttled, substate.Errorf(substate.ECONFLICT, "not redrivable")}, throttles: 0},
		{name: "UnavailableKeeps", answers: []error{throttled, substate.Errorf(substate.EUNAVAILABLE, "connection refused")}, throttles: 1},
		{name: "CancelledKeeps", answers: []error{throttled, context.Canceled}, throttles: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLane("stepfunctions", Limits{}, nil, timex.Backoff{Base: time.Hour, Max: 4 * time.Hour, Rand: func() float64 { return 0 }})
			for i, err := range tt.answers {
				if tt.endFirst && i == len(tt.answers)-1 {
					l.mu.Lock()
					l.until = time.Now().Add(-time.Millisecond)
					l.mu.Unlock()
				}
				if got := l.note(err); !errors.Is(got, err) {
					t.Fatalf("note(%v) = %v", err, got)
				}
			}
			l.mu.Lock()
			got := l.throttles
			l.mu.Unlock()
			if got != tt.throttles {
				t.Errorf("throttles in a row = %d, want %d", got, tt.throttles)
			}
			// The backoff left is the last throttled answer's: 30 min after
			// the first (half the nominal hour, Rand 0), an hour after the
			// second.
			want := time.Duration(max(tt.throttles, 1)) * 30 * time.Minute
			if d := l.backingOff(); d > want || d < want-time.Minute {
				t.Errorf("backing off for %s, want about %s", d, want)
			}
		})
	}
}
