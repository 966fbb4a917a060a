package substate

import "strings"

// SubState is the canonical, provider-agnostic sub-state of a workflow execution.
type SubState string

// The six canonical sub-states.
const (
	StateRunning    SubState = "running"
	StateWaiting    SubState = "waiting"
	StateBackingOff SubState = "backing-off"
	StateError      SubState = "error"
	StateSucceeded  SubState = "succeeded"
	StateFailed     SubState = "failed"
)

// SubStates lists every canonical sub-state in display order.
var SubStates = []SubState{StateRunning, StateWaiting, StateBackingOff, StateError, StateSucceeded, StateFailed}

// ParseSubState returns the canonical sub-state named s. Matching ignores case
// and surrounding space; anything else is an EINVALID error.
func ParseSubState(s string) (SubState, error) {
	v := SubState(strings.ToLower(strings.TrimSpace(s)))
	if !v.Valid() {
		return "", Errorf(EINVALID, "unknown sub-state %q (want one of %s)", s, joinSubStates())
	}
	return v, nil
}

func joinSubStates() string {
	names := make([]string, len(SubStates))
	for i, s := range SubStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Valid reports whether s is one of the six canonical sub-states.
func (s SubState) Valid() bool {
	switch s {
	case StateRunning, StateWaiting, StateBackingOff, StateError, StateSucceeded, StateFailed:
		return true
	}
	return false
}

// String returns the sub-state's wire name.
func (s SubState) String() string { return string(s) }

// Terminal reports whether the sub-state ends an execution.
func (s SubState) Terminal() bool { return s == StateSucceeded || s == StateFailed }

// Verb returns the default verb form of the sub-state. A failed execution
// that was aborted or killed uses VerbCancelled instead; mapping decides that.
func (s SubState) Verb() Verb {
	switch s {
	case StateRunning:
		return VerbExecuting
	case StateWaiting:
		return VerbWaiting
	case StateBackingOff:
		return VerbRetrying
	case StateError:
		return VerbFailing
	case StateSucceeded:
		return VerbCompleted
	case StateFailed:
		return VerbFailed
	}
	return ""
}

// Status returns the legacy status of the sub-state.
func (s SubState) Status() Status {
	switch s {
	case StateRunning, StateBackingOff, StateError:
		return StatusRunning
	case StateWaiting:
		return StatusPaused
	case StateSucceeded:
		return StatusCompleted
	case StateFailed:
		return StatusFailed
	}
	return ""
}

// MarshalText implements encoding.TextMarshaler.
func (s SubState) MarshalText() ([]byte, error) { return []byte(s), nil }

// AppendText implements encoding.TextAppender: the JSON encoder writes a
// sub-state into its own buffer instead of a new slice each time.
func (s SubState) AppendText(b []byte) ([]byte, error) { return append(b, s...), nil }

// UnmarshalText implements encoding.TextUnmarshaler; the empty string is
// accepted as "unset", anything else must be a canonical sub-state.
func (s *SubState) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = ""
		return nil
	}
	v, err := ParseSubState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Verb is the verb form of a sub-state (action → activity → event), for
// consumers that treat the verb as the state.
type Verb string

// The verb forms used by canonical events.
const (
	VerbExecuting Verb = "executing"
	VerbWaiting   Verb = "waiting"
	VerbRetrying  Verb = "retrying"
	VerbFailing   Verb = "failing"
	VerbCompleted Verb = "completed"
	VerbFailed    Verb = "failed"
	VerbCancelled Verb = "cancelled"
)

// Valid reports whether v is a known verb form.
func (v Verb) Valid() bool {
	switch v {
	case VerbExecuting, VerbWaiting, VerbRetrying, VerbFailing, VerbCompleted, VerbFailed, VerbCancelled:
		return true
	}
	return false
}

// SubState returns the sub-state v is a form of ("" for an unknown verb):
// cancelled is a form of failed.
func (v Verb) SubState() SubState {
	switch v {
	case VerbExecuting:
		return StateRunning
	case VerbWaiting:
		return StateWaiting
	case VerbRetrying:
		return StateBackingOff
	case VerbFailing:
		return StateError
	case VerbCompleted:
		return StateSucceeded
	case VerbFailed, VerbCancelled:
		return StateFailed
	}
	return ""
}

// ParseVerb returns the verb named s, or an EINVALID error naming the
// valid ones.
func ParseVerb(s string) (Verb, error) {
	if v := Verb(s); v.Valid() {
		return v, nil
	}
	return "", Errorf(EINVALID, "unknown verb %s: want executing, waiting, retrying, failing, completed, failed or cancelled", QuotePrefix(s, QuoteLimit))
}

// Status is the legacy plain status for consumers that predate sub-states.
type Status string

// The legacy statuses.
const (
	StatusRunning   Status = "running"
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// Provider names the workflow engine an event came from.
type Provider string

// The providers substate understands.
const (
	ProviderStepFunctions Provider = "stepfunctions"
	ProviderRestate       Provider = "restate"
	ProviderEngine        Provider = "engine"
)

// Providers lists every provider.
var Providers = []Provider{ProviderStepFunctions, ProviderRestate, ProviderEngine}

// ParseProvider returns the provider named s or an EINVALID error.
func ParseProvider(s string) (Provider, error) {
	p := Provider(strings.ToLower(strings.TrimSpace(s)))
	switch p {
	case ProviderStepFunctions, ProviderRestate, ProviderEngine:
		return p, nil
	}
	return "", Errorf(EINVALID, "unknown provider %q", s)
}

// String returns the provider's wire name.
func (p Provider) String() string { return string(p) }
