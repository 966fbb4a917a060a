package engine

import "time"

// Definition is a parsed and validated workflow definition. It is immutable
// once Parse returned it and safe for concurrent use.
type Definition struct {
	Name    string // the workflow's name
	Version string // the definition's version string
	StartAt string // the first state
	Source  []byte // the text it was parsed from
	// Timeout bounds a whole execution (the top-level timeout); 0: none.
	Timeout time.Duration

	states map[string]*state
	order  []string // state names in source order
}

// States returns the definition's state names in source order.
func (d *Definition) States() []string { return append([]string(nil), d.order...) }

// State types of the workflow language.
const (
	typeTask    = "Task"
	typeChoice  = "Choice"
	typeWait    = "Wait"
	typeSuccess = "Success"
	typeFail    = "Fail"
)

// pos is a position in the definition's text.
type pos struct{ line, col int }

// ref is a reference to a state by name, with where it was written.
type ref struct {
	name string
	pos
}

// state is one state of a definition; which fields are set depends on typ.
type state struct {
	name string
	typ  string
	pos  pos
	next ref // Task, Wait

	// Task
	service, operation string
	params             *template // nil: the state input is the task body
	retry              *retryPolicy
	timeout            time.Duration // 0: the engine's default
	catch              []catcher

	// Choice
	choices []choice
	dflt    ref

	// Wait: exactly one of seconds and timestamp is set.
	seconds   time.Duration
	timestamp time.Time
	hasSecs   bool

	// Fail
	errType, cause string
}

// catcher sends an error that matched errorType to next.
type catcher struct {
	errorType string // "*" matches every error
	next      ref
}

// choice is one rule of a Choice state.
type choice struct {
	cond condition
	next ref
}

// successors returns the references a state can move to, in a stable order.
func (s *state) successors() []ref {
	var out []ref
	if s.next.name != "" {
		out = append(out, s.next)
	}
	for _, c := range s.choices {
		out = append(out, c.next)
	}
	if s.dflt.name != "" {
		out = append(out, s.dflt)
	}
	for _, c := range s.catch {
		out = append(out, c.next)
	}
	return out
}

// terminal reports whether the state ends an execution.
func (s *state) terminal() bool { return s.typ == typeSuccess || s.typ == typeFail }
