package sfnhistory

import (
	"maps"
	"slices"
	"strings"
)

// maxChains bounds the open lines of events a Summary follows (parallel
// branches and map iterations run at once; a sequential execution has one).
const maxChains = 64

// Chain is one line of events, each naming the one before it
// (previousEventId): a sequential execution is one chain, a Parallel or
// Map state starts one per branch or iteration. A Summary keeps the newest
// event of each open chain with what it needs to count a Task state
// entered again after its failure was caught as a retry.
type Chain struct {
	// Task is the Task state the chain is in (the newest TaskStateEntered).
	Task string `json:"task,omitempty"`
	// Failure is the newest task failure of Task while nothing followed it
	// on the chain yet: a *Scheduled next is its Retry, anything else means
	// a Catch took it (or the execution ended).
	Failure int64 `json:"failure,omitempty"`
	// Caught are the Task states whose failure a Catch took, with that
	// failure, and that the chain has not entered again since.
	Caught []Caught `json:"caught,omitempty"`
	// Fork marks the event a Parallel or Map state starts its branches
	// from: each branch carries on a copy of the chain.
	Fork bool `json:"fork,omitempty"`
}

// Caught is a Task state whose failed attempt a Catch took.
type Caught struct {
	State   string `json:"state"`
	Failure int64  `json:"failure"`
}

// forkTypes are the events several branches continue from.
var forkTypes = map[string]bool{"ParallelStateStarted": true, "MapStateStarted": true}

// follow moves the chain of e's previous event on to e and applies e to
// it: a Task state entered again after a caught failure counts one retry.
func (s *Summary) follow(e *Event) {
	ch := s.takeChain(e.PreviousEventID)
	if ch.Failure != 0 && !isTaskScheduled(e.Type) {
		ch.Caught = append(slices.DeleteFunc(ch.Caught, func(c Caught) bool { return c.State == ch.Task }), Caught{ch.Task, ch.Failure})
		if len(ch.Caught) > maxOpenFailures {
			ch.Caught = ch.Caught[1:]
		}
	}
	if !IsTaskFailure(e.Type) {
		ch.Failure = 0
	}
	switch {
	case e.Type == "TaskStateEntered" && e.StateEntered != nil:
		ch.Task = e.StateEntered.Name
		if i := slices.IndexFunc(ch.Caught, func(c Caught) bool { return c.State == ch.Task }); i >= 0 {
			s.Retries++
			s.OpenFailures = slices.DeleteFunc(s.OpenFailures, func(id int64) bool { return id == ch.Caught[i].Failure })
			ch.Caught = slices.Delete(ch.Caught, i, i+1)
		}
	case IsTaskFailure(e.Type) && ch.Task != "":
		ch.Failure = e.ID
	case strings.HasSuffix(e.Type, "StateEntered"):
		ch.Task = ""
	}
	ch.Fork = forkTypes[e.Type]
	s.putChain(e.ID, ch)
}

// takeChain returns the chain whose newest event is id: the chain itself,
// no longer kept under id, or a copy when id is a fork; a new chain when
// there is none.
func (s *Summary) takeChain(id int64) Chain {
	ch, ok := s.Chains[id]
	switch {
	case !ok:
		return Chain{}
	case ch.Fork:
		c := *ch
		c.Caught, c.Fork = slices.Clone(c.Caught), false
		return c
	}
	delete(s.Chains, id)
	return *ch
}

// putChain keeps ch as the chain whose newest event is id, dropping the
// oldest chain past maxChains.
func (s *Summary) putChain(id int64, ch Chain) {
	if s.Chains == nil {
		s.Chains = map[int64]*Chain{}
	}
	s.Chains[id] = &ch
	if len(s.Chains) > maxChains {
		delete(s.Chains, slices.Min(slices.Collect(maps.Keys(s.Chains))))
	}
}

// forgetCaught forgets every caught failure (a redrive: entering the
// failed state again is not a retry).
func (s *Summary) forgetCaught() {
	for _, ch := range s.Chains {
		ch.Caught, ch.Failure = nil, 0
	}
}

// cloneChains returns a deep copy of chains.
func cloneChains(chains map[int64]*Chain) map[int64]*Chain {
	if len(chains) == 0 {
		return nil
	}
	out := make(map[int64]*Chain, len(chains))
	for id, ch := range chains {
		c := *ch
		c.Caught = slices.Clone(c.Caught)
		out[id] = &c
	}
	return out
}
