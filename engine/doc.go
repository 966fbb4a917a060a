// Package engine runs substate's workflow language: it parses and validates
// definitions, executes them durably, invokes tasks over NATS and emits the
// engine's status events. It also defines Provider, the interface every
// workflow engine substate can drive implements (Engine here, AWS Step
// Functions in providers/stepfunctions).
//
// # Definitions
//
// A definition is YAML or JSON (JSON is read as YAML, so both report
// positions alike). Parse reports every problem, each as a ValidationError
// "file:line:col: state "x": message": unknown fields, missing or mistyped
// fields, invalid JSONPath, references to missing states, a startAt that
// does not exist, no Success or Fail state reachable from startAt, a
// terminal state with next, and loops that can never be left. A loop (a
// strongly connected group of states) can be left when one of its states
// has a transition out of it: a Task's next or a catch entry, a Choice rule
// or default; so a Task whose catch leads round a Wait back to it while its
// next leads out is a valid polling loop.
// A Task needs resource ("service.operation", split at the last dot) and
// next: a workflow ends only in a Success or Fail state. A Wait needs next
// and exactly one of seconds (fractions allowed) and timestamp (RFC 3339).
// Fail's error defaults to "Failed".
//
// # Data flow
//
// The execution input (a JSON object) is the first state's input. A Task
// sends its parameters as the request body, or its whole input when it has
// none. In parameters, a key ending in ".$" takes the value its JSONPath
// selects from the state input, under the key without the suffix
// ("orderId.$": "$.order.id", "first.$": "$.items[0]"); every other value
// is a literal, including strings that start with "$". JSONPath is RFC 9535:
// a singular query ($.a, $.items[0]) gives the node itself and is a
// PathError when it selects nothing; any other query gives the list of
// what it selects. A Choice variable must be a singular query.
//
// A Task's output becomes the next state's input by merging: when the
// input and the output are both objects, the output's fields are laid over
// the input's (so tasks return only what they add); an empty or null reply
// leaves the input unchanged; any other output replaces the input. Choice
// and Wait pass their input on unchanged; Success's input is the
// execution's output.
//
// # Tasks, retries and catch
//
// A Task attempt is a NATS request to substate.TaskSubject(service,
// operation) with header Substate-Idempotency-Key set to
// "<execution>/<step>/<state>/<attempt>", where step counts the states the
// execution entered (so each visit of a state in a loop differs) and
// attempt counts from 1: a resume after a crash repeats the key of the
// attempt it repeats. The reply is the output (JSON), or an error: a body
// {"errorType":…,"message":…}, or a nats micro error (headers
// Nats-Service-Error-Code, used as the error type unless it is numeric, and
// Nats-Service-Error, the message). No responder raises ServiceUnavailable,
// no reply within the state's timeout (default Engine.TaskTimeout) raises
// TimeoutError.
//
// A retry block retries the errors whose type is in its errorTypes list
// (default ["*"], any error). maxAttempts (default 3) counts retries after
// the first try; retry n waits initialDelaySeconds (default 1) ×
// backoffMultiplier^(n-1) (default 2), capped by maxDelaySeconds, then
// jittered upwards by up to 20% (d × (1 + 0.2×Jitter())) and capped again:
// never less than the configured delay.
// ServiceUnavailable is retryable: when the task's own retry block does not
// cover it, three retries after about 1, 2 and 4 seconds apply. When retries
// are exhausted (or none apply), the first catch entry whose errorType
// matches ("*" matches any) moves to its next with the failed state's input
// plus "error": {"errorType":…,"message":…}; with no match the execution fails.
//
// # Workflow timeout
//
// A top-level timeout (Definition.Timeout) bounds a whole execution from
// its start. When it passes, the execution fails with TimeoutError in the
// state it is in: an attempt in flight is abandoned, a wait or backoff cut
// short, and no retry or catch applies (they handle a task's own errors).
// The deadline is stored in the record, so a restart keeps it.
//
// # Durability and events
//
// Each execution is a record in bbolt (Engine.Path): state, input, phase,
// attempt, timer deadline and emission sequence. Every step is written
// before the engine acts on it, so Open resumes every unfinished execution
// where it was, even after kill -9: an attempt in flight is repeated with the
// same idempotency key, and a wait or backoff whose deadline passed fires at once.
//
// Every transition emits a substate.EngineEvent (Kind substate.RawEngine,
// id "<execution>/<seq>") through the RawPublisher: the event is stored with
// the step that caused it and published, retrying until acknowledged,
// before the engine moves on; after a crash it is published again under the
// same id, which JetStream's duplicate window drops. Emitted: running when a
// task attempt starts; error when one fails (with the error type and
// message); backing-off with the retry number and NextRetryAt; waiting in a
// Wait state; succeeded at Success; failed at Fail, on an uncaught error or
// on Stop. Choice states emit nothing. RetryCount counts the retries of the
// whole execution, over all its tasks (on backing-off, including the retry
// being waited for), so a failed execution keeps them in the view.
//
// Describe returns the newest event as Status.Raw: adapters do not import
// each other, so the caller maps it.
package engine
