package state_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/ratelog"
	"github.com/substatehq/substate/state"
)

// BenchmarkLogChange is the log of the bench's changes scenario, per
// change: a third each of running, succeeded and failed with an error,
// written by the worker's handlers to nowhere.
func BenchmarkLogChange(b *testing.B) {
	arn := "arn:aws:states:us-east-1:123456789012:execution:provision-tenant:e400"
	changes := []substate.Change{
		{TenantID: "tenant-0", New: substate.TenantView{WorkflowSubState: substate.StateRunning, WorkflowExecutionID: arn}},
		{TenantID: "tenant-0", Old: substate.TenantView{WorkflowSubState: substate.StateRunning, WorkflowExecutionID: arn},
			New: substate.TenantView{WorkflowSubState: substate.StateSucceeded}},
		{TenantID: "tenant-0", Old: substate.TenantView{WorkflowSubState: substate.StateRunning, WorkflowExecutionID: arn},
			New: substate.TenantView{WorkflowSubState: substate.StateFailed, WorkflowExecutionID: arn, WorkflowErrorMessage: "quota exceeded for tenant tenant-0 in eu-west-1"}},
	}
	for _, h := range []struct {
		name    string
		handler slog.Handler
	}{
		{"text", slog.NewTextHandler(io.Discard, nil)},
		{"json", slog.NewJSONHandler(io.Discard, nil)},
		{"text rate-limited", ratelog.New(slog.NewTextHandler(io.Discard, nil), 1<<30)},
	} {
		b.Run(h.name, func(b *testing.B) {
			l := slog.New(h.handler).With("component", "projector")
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				state.LogChange(ctx, l, &changes[i%len(changes)])
			}
		})
	}
}
