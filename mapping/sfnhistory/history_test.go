package sfnhistory_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/substatehq/substate/mapping/sfnhistory"
)

// story builds a history of n events in which tasks fail and are retried
// in several states, and returns it oldest first.
func story(rng *rand.Rand, n int) []sfnhistory.Event {
	events := []sfnhistory.Event{{ID: 1, Type: "ExecutionStarted"}}
	add := func(prev int64, typ string) int64 {
		id := int64(len(events) + 1)
		e := sfnhistory.Event{ID: id, PreviousEventID: prev, Type: typ}
		if typ == "TaskFailed" {
			e.TaskFailed = &sfnhistory.FailureDetails{Error: "E", Cause: fmt.Sprintf("failure %d", id)}
		}
		events = append(events, e)
		return id
	}
	for len(events) < n-4 {
		prev := add(int64(len(events)), "TaskStateEntered")
		prev = add(prev, "TaskScheduled")
		for rng.IntN(3) == 0 && len(events) < n-4 {
			prev = add(add(prev, "TaskStarted"), "TaskFailed")
			prev = add(prev, "TaskScheduled")
		}
		add(add(add(prev, "TaskStarted"), "TaskSucceeded"), "TaskStateExited")
	}
	return events[:min(len(events), n)]
}

func TestFoldInPiecesEqualsFoldAtOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		events := story(rng, 200+rng.IntN(300))
		want := sfnhistory.Summary{}.Fold(slices.Clone(events))
		var got sfnhistory.Summary
		for rest := slices.Clone(events); len(rest) > 0; {
			k := 1 + rng.IntN(min(len(rest), 40))
			page := slices.Clone(rest[:k])
			slices.Reverse(page) // newest first, as reverseOrder pages come
			if rng.IntN(4) == 0 && got.ThroughEventID > 0 {
				page = append(page, events[got.ThroughEventID-1]) // an overlap
			}
			got = got.Fold(page)
			rest = rest[k:]
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("folded in pieces %+v\nat once %+v", got, want)
		}
		if got.Events != len(events) || got.Retries == 0 {
			t.Fatalf("summary %+v of %d events", got, len(events))
		}
	}
}

func TestRetryCount(t *testing.T) {
	ev := func(id, prev int64, typ string) sfnhistory.Event {
		return sfnhistory.Event{ID: id, PreviousEventID: prev, Type: typ}
	}
	s := sfnhistory.Summary{}.Fold([]sfnhistory.Event{ev(1, 0, "ExecutionStarted"), ev(2, 1, "TaskScheduled"), ev(3, 2, "TaskFailed")})
	if !s.BackingOff() || s.RetryCount() != 1 {
		t.Fatalf("after the first failure: backing off %v, retries %d; want true, 1", s.BackingOff(), s.RetryCount())
	}
	s = s.Fold([]sfnhistory.Event{ev(4, 3, "TaskScheduled")})
	if s.BackingOff() || s.RetryCount() != 1 {
		t.Fatalf("the retry running: backing off %v, retries %d; want false, 1", s.BackingOff(), s.RetryCount())
	}
}
