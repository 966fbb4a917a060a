package mapping_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

func TestStepFunctionsRevision(t *testing.T) {
	order := []substate.Revision{
		mapping.StepFunctionsRevision(0, mapping.RankActive, 0),
		mapping.StepFunctionsRevision(0, mapping.RankActive, 12),
		mapping.StepFunctionsRevision(0, mapping.RankTerminal, 0),
		mapping.StepFunctionsRevision(1, mapping.RankActive, 0),
		mapping.StepFunctionsRevision(1, mapping.RankActive, 40),
		mapping.StepFunctionsRevision(1, mapping.RankTerminal, 0),
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("revision %d (%d) not above %d (%d)", i, order[i], i-1, order[i-1])
		}
	}
	if max := mapping.StepFunctionsRevision(8191, mapping.RankTerminal, 1<<32-1); max >= 1<<53 {
		t.Fatalf("max revision %d not below 2^53", max)
	}
}

func TestRestateRevision(t *testing.T) {
	at := time.Date(2026, 11, 23, 22, 19, 5, 969e6, time.UTC)
	// The rows a real server reports for one invocation, in order; the
	// first six share one modified_at.
	rows := []struct {
		at            time.Time
		attempt, rank int
	}{
		{at, 0, mapping.RestateRankQueued}, {at, 1, mapping.RestateRankRunning}, {at, 1, mapping.RestateRankBackingOff},
		{at, 2, mapping.RestateRankRunning}, {at, 1023, mapping.RestateRankBackingOff}, {at, 0, mapping.RestateRankSettled},
		{at.Add(time.Millisecond), 1, mapping.RestateRankRunning},
	}
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		if mapping.RestateRevision(a.at, a.attempt, a.rank) >= mapping.RestateRevision(b.at, b.attempt, b.rank) {
			t.Errorf("row %d %+v is not newer than row %d %+v", i, b, i-1, a)
		}
	}
	if r := mapping.RestateRevision(time.Date(2054, 1, 1, 0, 0, 0, 0, time.UTC), 5000, mapping.RestateRankBackingOff); r >= 1<<53 {
		t.Errorf("revision %d is not below 2^53", r)
	}
}
