package engine

import (
	"fmt"
	"strings"

	"github.com/substatehq/substate"
)

// ValidationError is one problem in a workflow definition, with the position
// of the text it is about.
type ValidationError struct {
	File  string // file name, empty when the definition did not come from a file
	Line  int    // 1-based line
	Col   int    // 1-based column
	State string // the state the problem is in, empty for workflow-level problems
	Msg   string
}

// Error formats the problem as file:line:col: state "x": message.
func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Col)
	if e.State != "" {
		fmt.Fprintf(&b, "state %q: ", e.State)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ValidationErrors is every problem found in a definition, in source order.
type ValidationErrors []*ValidationError

// Error lists the problems, one a line.
func (es ValidationErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems so errors.As finds each *ValidationError.
func (es ValidationErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Error types the engine raises itself. Task services raise their own.
const (
	// ErrTimeout is raised when a task did not reply within its timeout.
	ErrTimeout = "TimeoutError"
	// ErrServiceUnavailable is raised when no task service listens on the
	// task's subject (or NATS is away). It is retried even without a retry block (see the package documentation).
	ErrServiceUnavailable = "ServiceUnavailable"
	// ErrTaskFailed is raised for an error reply that names no error type.
	ErrTaskFailed = "TaskFailed"
	// ErrInvalidOutput is raised when a task replies with something other than JSON.
	ErrInvalidOutput = "InvalidOutput"
	// ErrPath is raised when a parameter's JSONPath selects nothing.
	ErrPath = "PathError"
	// ErrNoChoiceMatched is raised by a Choice state with no matching rule and no default.
	ErrNoChoiceMatched = "NoChoiceMatched"
	// ErrStopped is the error type of an execution stopped without one.
	ErrStopped = substate.StopErrorType
)

// TaskError is an error raised while executing a state: a task's error reply
// or one of the engine's own error types. Retry and catch match on Type.
type TaskError struct {
	Type    string `json:"errorType"`
	Message string `json:"message"`
}

// Error returns "Type: Message".
func (e *TaskError) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

func taskErrorf(typ, format string, args ...any) *TaskError {
	return &TaskError{Type: typ, Message: fmt.Sprintf(format, args...)}
}
