package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

// TestCheckSFNPermissions: the worker logs, per feature, exactly the IAM
// actions its credentials lack, and says so when nothing is missing.
func TestCheckSFNPermissions(t *testing.T) {
	srv := awstest.New(t)
	var logs bytes.Buffer
	w := &Worker{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	p := stepfunctions.New(srv.Config())
	p.AccountID = awstest.AccountID

	w.checkSFNPermissions(context.Background(), p)
	if !strings.Contains(logs.String(), "step functions permissions checked") || strings.Contains(logs.String(), "missing") {
		t.Fatalf("all granted:\n%s", logs.String())
	}
	logs.Reset()
	srv.Deny("GetExecutionHistory", 1)
	srv.Deny("RedriveExecution", 1)
	w.checkSFNPermissions(context.Background(), p)
	got := logs.String()
	for _, want := range []string{
		`feature=reconcile missing=states:GetExecutionHistory`,
		`feature=operate missing="states:GetExecutionHistory, states:RedriveExecution"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("logs lack %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "permissions checked") {
		t.Errorf("reported all granted:\n%s", got)
	}
}
