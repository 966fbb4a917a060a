package state

import (
	"context"
	"log/slog"

	"github.com/substatehq/substate"
)

// MaxLoggedError is the most of a workflow error message a change's log
// line carries, in bytes; a longer one is cut (on a character boundary)
// and ends with "…". The view and its history keep the whole message.
const MaxLoggedError = 200

// LogChange writes the one log line of a committed change. A tenant whose
// deadline passed is "tenant stuck" at warn (tenant, sub-state, SLO,
// since, execution). Any other change is "view changed": the tenant, the
// old and new sub-state and the execution; the retry count when it
// changed; the error message when it was set or changed; unstuck=true
// when it moved a stuck tenant on. That line is at info, or at warn when
// the change sets or changes the workflow's error: a failure the provider
// reported is the tenant's, not substate's, and never logs at error,
// which is for substate's own faults. A nil logger logs nothing.
func LogChange(ctx context.Context, l *slog.Logger, c *substate.Change) {
	if l == nil {
		return
	}
	o, n := &c.Old, &c.New
	if n.Stuck && !o.Stuck {
		l.LogAttrs(ctx, slog.LevelWarn, "tenant stuck: its deadline passed with no change",
			slog.String("tenant", c.TenantID),
			slog.String("subState", string(n.WorkflowSubState)),
			slog.String("slo", string(n.DeadlineSLO)),
			slog.Time("since", n.StuckSince),
			slog.String("execution", n.WorkflowExecutionID))
		return
	}
	newError := n.WorkflowErrorMessage != "" && n.WorkflowErrorMessage != o.WorkflowErrorMessage
	level := slog.LevelInfo
	if newError {
		level = slog.LevelWarn
	}
	if !l.Enabled(ctx, level) {
		return
	}
	execution := n.WorkflowExecutionID
	if execution == "" {
		execution = o.WorkflowExecutionID // succeeded cleared it
	}
	var buf [7]slog.Attr
	attrs := append(buf[:0],
		slog.String("tenant", c.TenantID),
		slog.String("old", string(o.WorkflowSubState)),
		slog.String("new", string(n.WorkflowSubState)),
		slog.String("execution", execution))
	if n.WorkflowRetryCount != o.WorkflowRetryCount {
		attrs = append(attrs, slog.Int("retries", n.WorkflowRetryCount))
	}
	if newError {
		attrs = append(attrs, slog.String("error", loggedError(n.WorkflowErrorMessage)))
	}
	if o.Stuck && !n.Stuck {
		attrs = append(attrs, slog.Bool("unstuck", true))
	}
	l.LogAttrs(ctx, level, "view changed", attrs...)
}

// logNoops writes a debug line for each event of a batch that changed
// nothing (a duplicate, an unchanged or a stale event), when the logger
// writes debug lines.
func logNoops(ctx context.Context, l *slog.Logger, noops []noop) {
	for i := range noops {
		e := &noops[i]
		l.LogAttrs(ctx, slog.LevelDebug, "view unchanged",
			slog.String("tenant", e.tenant), slog.Uint64("seq", e.seq), slog.String("outcome", e.outcome.String()))
	}
}

// noop is an event that changed nothing, for its debug line.
type noop struct {
	tenant  string
	seq     uint64
	outcome Outcome
}

// loggedError returns a workflow error message for a log line: cut to
// MaxLoggedError bytes with substate.Truncate and ending with "…" when it
// was cut.
func loggedError(msg string) string {
	if len(msg) <= MaxLoggedError {
		return msg
	}
	return substate.Truncate(msg, MaxLoggedError) + "…"
}
