package publishers_test

import (
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
)

// BenchmarkChangeMsg builds a change-feed message as the feed does, from
// a change the outbox encoded already (encoded) and from one decoded back
// from the file (decoded).
func BenchmarkChangeMsg(b *testing.B) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	view := substate.TenantView{TenantID: "tenant-00042", Provider: substate.ProviderStepFunctions,
		WorkflowSubState: substate.StateRunning, WorkflowVerb: substate.StateRunning.Verb(), WorkflowType: "provision",
		WorkflowExecutionID: "arn:aws:states:eu-west-1:123456789012:execution:provision:0f9c2f1e-9a4b-4c7e-8d3a-2b1f0e6c5d4a",
		WorkflowStep:        "CreateDatabase", UpdatedAt: at}
	next := view
	next.WorkflowSubState, next.WorkflowVerb = substate.StateFailed, substate.StateFailed.Verb()
	next.WorkflowErrorType, next.WorkflowErrorMessage = "States.TaskFailed", "RDS CreateDBInstance failed: DBInstanceAlreadyExists (request 8f2c1d3e-1111-4a2b-9c3d-5e6f7a8b9c0d)"
	c := substate.Change{Seq: 123456, TenantID: view.TenantID, Old: view, New: next,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	data, err := json.Marshal(&c)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		encoded []byte
	}{{"encoded", data}, {"decoded", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			c := c
			c.Encoded = tc.encoded
			b.ReportAllocs()
			for b.Loop() {
				if _, err := publishers.ChangeMsg(&c, "https://substate.example"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
