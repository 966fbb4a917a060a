package stepfunctions_test

import (
	"context"
	"testing"

	"github.com/substatehq/substate"
)

// TestActionPreflight: a dry run's preflight names the IAM permission an
// action lacks, and only the action's own.
func TestActionPreflight(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	srv.Deny("RedriveExecution", 2)
	if why, err := p.ActionPreflight(ctx, substate.ActionRetry); err != nil || why != "the AWS credentials lack the IAM permission states:RedriveExecution" {
		t.Errorf("retry: %q, %v", why, err)
	}
	if why, err := p.ActionPreflight(ctx, substate.ActionStop); err != nil || why != "" {
		t.Errorf("stop: %q, %v", why, err)
	}
}
