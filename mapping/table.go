package mapping

import (
	"slices"

	"github.com/substatehq/substate"
)

// Condition is what, besides the native state, decides a mapping row. The
// empty condition means the native state alone decides.
type Condition string

// The conditions the mapping tables use.
const (
	CondNone Condition = ""
	// CondTaskFailureTip: a poll whose history shows a task *Failed or
	// *TimedOut as the newest task event, with no newer *Scheduled yet.
	CondTaskFailureTip Condition = "history: newest task failure (`*Failed`/`*TimedOut`) has no newer `*Scheduled`"
	// CondCompletedSuccess: completion_result is success (or absent with no failure).
	CondCompletedSuccess Condition = "completion_result = success"
	// CondCompletedFailure: completion_result is failure.
	CondCompletedFailure Condition = "completion_result = failure"
	// CondCompletedKilled: a failure whose completion_failure is [409] killed or canceled.
	CondCompletedKilled Condition = "completion_result = failure, completion_failure `[409] killed`/`[409] canceled`"
	// CondRetryScheduled: next_retry_at is set and later than the row's
	// modified_at, so a retry is scheduled and not started yet.
	CondRetryScheduled Condition = "`next_retry_at` later than `modified_at`"
	// CondEngineStopped: the engine event is marked stopped (Engine.Stop).
	CondEngineStopped Condition = "`stopped: true`"
)

// Row is one line of a provider's mapping table: a native state (under a
// condition) and the sub-state, verb and legacy status it maps to.
type Row struct {
	Provider  substate.Provider
	State     string // the native state as the provider spells it
	Condition Condition
	SubState  substate.SubState
	Verb      substate.Verb
	Status    substate.Status
	Note      string
}

func row(p substate.Provider, state string, c Condition, s substate.SubState, note string) Row {
	return Row{Provider: p, State: state, Condition: c, SubState: s, Verb: s.Verb(), Status: s.Status(), Note: note}
}

func cancelled(r Row) Row {
	r.Verb = substate.VerbCancelled
	return r
}

const (
	sfn     = substate.ProviderStepFunctions
	restate = substate.ProviderRestate
	eng     = substate.ProviderEngine
)

// table is the mapping, one row per native state and condition. The code
// looks rows up here; docs/state-mapping.md is generated from it.
var table = []Row{
	row(sfn, "RUNNING", CondNone, substate.StateRunning, "execution in progress"),
	row(sfn, "RUNNING", CondTaskFailureTip, substate.StateBackingOff, "waiting out a Retry interval; only a poll with history can tell"),
	row(sfn, "SUCCEEDED", CondNone, substate.StateSucceeded, ""),
	row(sfn, "FAILED", CondNone, substate.StateFailed, "errorMessage from `cause`"),
	row(sfn, "TIMED_OUT", CondNone, substate.StateFailed, "execution timeout (`States.Timeout`)"),
	cancelled(row(sfn, "ABORTED", CondNone, substate.StateFailed, "stopped by StopExecution")),
	row(sfn, "PENDING_REDRIVE", CondNone, substate.StateWaiting, "redrive requested, not running yet"),

	row(restate, "pending", CondNone, substate.StateWaiting, "enqueued behind another invocation of the same key"),
	row(restate, "scheduled", CondNone, substate.StateWaiting, "delayed invocation, not started yet"),
	row(restate, "ready", CondNone, substate.StateRunning, "ready to run, waiting for an invoker slot"),
	row(restate, "ready", CondRetryScheduled, substate.StateBackingOff, "a retry is scheduled (a webhook may say so without the backing-off status)"),
	row(restate, "running", CondNone, substate.StateRunning, "retry_count − 1 retries (retry_count is the attempt number)"),
	row(restate, "running", CondRetryScheduled, substate.StateBackingOff, "a retry is scheduled; errorMessage from last_failure"),
	row(restate, "active", CondNone, substate.StateRunning, "spec alias of running"),
	row(restate, "active", CondRetryScheduled, substate.StateBackingOff, "a retry is scheduled"),
	row(restate, "backing-off", CondNone, substate.StateBackingOff, "retry_count retries; errorMessage: first line of last_failure"),
	row(restate, "suspended", CondNone, substate.StateWaiting, "awaiting a promise, timer or call"),
	row(restate, "paused", CondNone, substate.StateError, "retries exhausted (or paused by hand), awaiting a resume; retries and errorMessage from the journal events and retry policy the poller attaches"),
	row(restate, "completed", CondCompletedSuccess, substate.StateSucceeded, ""),
	row(restate, "completed", CondCompletedFailure, substate.StateFailed, "errorMessage: completion_failure without its [code]"),
	cancelled(row(restate, "completed", CondCompletedKilled, substate.StateFailed, "killed or cancelled by an operator")),
	row(restate, "succeeded", CondNone, substate.StateSucceeded, "spec alias of completed + success"),
	row(restate, "failed", CondNone, substate.StateFailed, "spec alias of completed + failure"),
	row(restate, "error", CondNone, substate.StateFailed, "spec string; the spec maps it to failed"),

	row(eng, substate.EngineRunning, CondNone, substate.StateRunning, "a task attempt started"),
	row(eng, substate.EngineWaiting, CondNone, substate.StateWaiting, "in a Wait state"),
	row(eng, substate.EngineBackingOff, CondNone, substate.StateBackingOff, "between two attempts of a task"),
	row(eng, substate.EngineError, CondNone, substate.StateError, "an attempt failed; a retry or catch may follow"),
	row(eng, substate.EngineSucceeded, CondNone, substate.StateSucceeded, "reached a Success state"),
	row(eng, substate.EngineFailed, CondNone, substate.StateFailed, "reached a Fail state, an uncaught error or the workflow's timeout"),
	cancelled(row(eng, substate.EngineFailed, CondEngineStopped, substate.StateFailed, "stopped by an operator")),
}

// Table returns a copy of the mapping table, in documentation order.
func Table() []Row { return slices.Clone(table) }

type rowKey struct {
	provider substate.Provider
	state    string
	cond     Condition
}

var rowIndex = func() map[rowKey]*Row {
	m := make(map[rowKey]*Row, len(table))
	for i := range table {
		r := &table[i]
		m[rowKey{r.Provider, r.State, r.Condition}] = r
	}
	return m
}()

// lookup returns the row of a native state under a condition.
func lookup(p substate.Provider, state string, c Condition) (*Row, bool) {
	r, ok := rowIndex[rowKey{p, state, c}]
	return r, ok
}
