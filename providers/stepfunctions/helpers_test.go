package stepfunctions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/providers/stepfunctions"
	"github.com/substatehq/substate/testkit/awstest"
)

const (
	roleARN    = "arn:aws:iam::123456789012:role/substate-sfn"
	definition = `{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`
)

// newProvider returns a fake Step Functions and a provider talking to it
// with the real SDK client, with the account configured.
func newProvider(t *testing.T) (*awstest.Server, *stepfunctions.Provider) {
	t.Helper()
	srv := awstest.New(t)
	p := stepfunctions.New(srv.Config())
	p.AccountID, p.RoleARN = awstest.AccountID, roleARN
	p.Now = func() time.Time { return time.Date(2024, 6, 19, 10, 5, 0, 0, time.UTC) }
	return srv, p
}

// ensure creates the "orders" state machine and returns its ARN.
func ensure(t *testing.T, p *stepfunctions.Provider) string {
	t.Helper()
	arn, err := p.EnsureWorkflow(context.Background(), engine.Workflow{Name: "orders", Definition: []byte(definition)})
	if err != nil {
		t.Fatal(err)
	}
	return arn
}

// wantCode fails the test unless err carries the substate error code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := substate.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
}

// fixture returns an embedded provider fixture.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	return fixtures.Provider(name)
}

// historyFixture returns the events of sfn-history-retry.json.
func historyFixture(t *testing.T) []json.RawMessage {
	t.Helper()
	var page struct{ Events []json.RawMessage }
	if err := json.Unmarshal(fixture(t, "sfn-history-retry.json"), &page); err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// decodePayload decodes a poll raw event's body.
func decodePayload(t *testing.T, raw substate.RawEvent) (execution map[string]any, events []map[string]any) {
	t.Helper()
	var p struct {
		Execution map[string]any
		History   struct{ Events []map[string]any }
		PolledAt  time.Time
	}
	if err := json.Unmarshal(raw.Body, &p); err != nil {
		t.Fatalf("decode poll payload: %v\n%s", err, raw.Body)
	}
	if p.PolledAt.IsZero() || p.History.Events == nil {
		t.Fatalf("poll payload without polledAt or history.events: %s", raw.Body)
	}
	return p.Execution, p.History.Events
}
