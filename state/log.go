package state

import (
	"context"
	"log/slog"

	"github.com/substatehq/substate"
)

// LogChange writes the logs of one committed change: a sub-state change at
// info (tenant, old, new, execution), a retry count increase at warn
// (tenant, retry count, error) and an error message set or changed at error
// (tenant, execution, the full message); a tenant that became stuck at
// warn (tenant, sub-state, SLO, since) and one that moved on at info. A nil
// logger logs nothing.
func LogChange(ctx context.Context, l *slog.Logger, c *substate.Change) {
	if l == nil {
		return
	}
	o, n := &c.Old, &c.New
	switch {
	case n.Stuck && !o.Stuck:
		l.LogAttrs(ctx, slog.LevelWarn, "tenant stuck: its deadline passed with no change",
			slog.String("tenant", c.TenantID),
			slog.String("subState", string(n.WorkflowSubState)),
			slog.String("slo", string(n.DeadlineSLO)),
			slog.Time("since", n.StuckSince),
			slog.String("execution", n.WorkflowExecutionID))
	case o.Stuck && !n.Stuck:
		l.LogAttrs(ctx, slog.LevelInfo, "tenant no longer stuck",
			slog.String("tenant", c.TenantID),
			slog.String("subState", string(n.WorkflowSubState)))
	}
	execution := n.WorkflowExecutionID
	if execution == "" {
		execution = o.WorkflowExecutionID // succeeded cleared it
	}
	if o.WorkflowSubState != n.WorkflowSubState {
		l.LogAttrs(ctx, slog.LevelInfo, "workflow sub-state changed",
			slog.String("tenant", c.TenantID),
			slog.String("old", string(o.WorkflowSubState)),
			slog.String("new", string(n.WorkflowSubState)),
			slog.String("execution", execution))
	}
	if n.WorkflowRetryCount > o.WorkflowRetryCount {
		cause := n.WorkflowErrorMessage
		if cause == "" {
			cause = o.WorkflowErrorMessage // the retry cleared the error it retried
		}
		l.LogAttrs(ctx, slog.LevelWarn, "workflow retry count increased",
			slog.String("tenant", c.TenantID),
			slog.Int("retryCount", n.WorkflowRetryCount),
			slog.String("error", cause))
	}
	if n.WorkflowErrorMessage != "" && n.WorkflowErrorMessage != o.WorkflowErrorMessage {
		l.LogAttrs(ctx, slog.LevelError, "workflow error",
			slog.String("tenant", c.TenantID),
			slog.String("execution", execution),
			slog.String("error", n.WorkflowErrorMessage))
	}
}
