package sfnhistory_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
	enter := func(prev int64, name string) int64 {
		id := add(prev, "TaskStateEntered")
		events[id-1].StateEntered = &sfnhistory.StateDetails{Name: name}
		return id
	}
	for len(events) < n-12 {
		state := fmt.Sprintf("S%d", rng.IntN(4))
		prev := enter(int64(len(events)), state)
		// A polling loop: the failure is caught, a Wait, the state again.
		for rng.IntN(4) == 0 && len(events) < n-12 {
			prev = add(add(add(prev, "TaskScheduled"), "TaskStarted"), "TaskFailed")
			prev = add(add(prev, "WaitStateEntered"), "WaitStateExited")
			prev = enter(prev, state)
		}
		prev = add(prev, "TaskScheduled")
		for rng.IntN(3) == 0 && len(events) < n-12 {
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
			got = roundTrip(t, got.Fold(page)) // a poll's summary travels as JSON
			rest = rest[k:]
		}
		if g, w := jsonOf(t, got), jsonOf(t, roundTrip(t, want)); g != w {
			t.Fatalf("folded in pieces %s\nat once %s", g, w)
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

// roundTrip returns s after a JSON encoding and decoding, as a poll's
// prior summary reaches the mapping.
func roundTrip(t *testing.T, s sfnhistory.Summary) sfnhistory.Summary {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out sfnhistory.Summary
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReenteredTask is the rule of docs/state-mapping.md: a Task state
// entered again after a Catch took its failure counts one retry; a state
// entered again after it succeeded, another branch entering the same
// state, or a redrive do not.
func TestReenteredTask(t *testing.T) {
	type step struct {
		typ, state string
		prev       int // events back to the previous one on its line; 0: the one just before
	}
	build := func(steps []step) []sfnhistory.Event {
		var events []sfnhistory.Event
		for i, s := range steps {
			e := sfnhistory.Event{ID: int64(i + 1), PreviousEventID: int64(i - s.prev), Type: s.typ}
			if s.state != "" {
				e.StateEntered = &sfnhistory.StateDetails{Name: s.state}
			}
			if sfnhistory.IsTaskFailure(s.typ) {
				e.TaskFailed = &sfnhistory.FailureDetails{Error: "Job.NotReady", Cause: "not ready"}
			}
			events = append(events, e)
		}
		return events
	}
	attempt := func(state, end string) []step {
		return []step{{typ: "TaskStateEntered", state: state}, {typ: "TaskScheduled"}, {typ: "TaskStarted"}, {typ: end}}
	}
	wait := []step{{typ: "WaitStateEntered", state: "Pause"}, {typ: "WaitStateExited"}, {typ: "ChoiceStateEntered", state: "Ready?"}, {typ: "ChoiceStateExited"}}
	concat := func(parts ...[]step) []step { return slices.Concat(parts...) }
	for _, tt := range []struct {
		name  string
		steps []step
		want  int
	}{
		{"PollingLoopCaught", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskFailed"), wait, attempt("Check", "TaskFailed"), wait, attempt("Check", "TaskSucceeded")), 2},
		{"CaughtStraightBackToItself", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskFailed"), attempt("Check", "TaskSucceeded")), 1},
		{"PollingLoopSucceeding", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskSucceeded"), wait, attempt("Check", "TaskSucceeded"), wait, attempt("Check", "TaskSucceeded")), 0},
		{"RetriedThenCaughtThenEntered", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskFailed"), []step{{typ: "TaskScheduled"}, {typ: "TaskStarted"}, {typ: "TaskFailed"}},
			wait, attempt("Check", "TaskSucceeded")), 2},
		{"CaughtThenAnotherState", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskFailed"), wait, attempt("Notify", "TaskSucceeded")), 0},
		{"Redrive", concat([]step{{typ: "ExecutionStarted"}},
			attempt("Check", "TaskFailed"), []step{{typ: "ExecutionFailed"}, {typ: "ExecutionRedriven"}}, attempt("Check", "TaskSucceeded")), 0},
		{"MapIterations", concat([]step{{typ: "ExecutionStarted"}, {typ: "MapStateEntered", state: "Each"}, {typ: "MapStateStarted"},
			{typ: "MapIterationStarted"}}, attempt("Check", "TaskFailed"), []step{{typ: "PassStateEntered", state: "Skip"}},
			// The second iteration starts from the Map, not from the first one's failure.
			[]step{{typ: "MapIterationStarted", prev: 6}}, attempt("Check", "TaskSucceeded")), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			events := build(tt.steps)
			all := sfnhistory.Summary{}.Fold(slices.Clone(events))
			if got := all.RetryCount(); got != tt.want {
				t.Fatalf("retries = %d, want %d", got, tt.want)
			}
			// Read in two polls, the summary in between as JSON: the same.
			for cut := 1; cut < len(events); cut++ {
				s := roundTrip(t, sfnhistory.Summary{}.Fold(slices.Clone(events[:cut])))
				s = s.Fold(slices.Clone(events[cut:]))
				if got := s.RetryCount(); got != tt.want {
					t.Fatalf("read in two polls cut at %d: retries = %d, want %d", cut, got, tt.want)
				}
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
