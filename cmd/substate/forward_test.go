package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
)

func TestRunForwardsToEventBridge(t *testing.T) {
	aws := awstest.New(t)
	awsEnv(t, aws.URL, awstest.Region)
	w := startWorker(t, t.TempDir(), "--eventbridge-bus", "tenants")
	if code := postFile(t, w.HTTP.URL()+"/v1/ingest/eventbridge", examplePath("stepfunctions-failed.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	eventually(t, func() string {
		if n := len(aws.Events()); n != 1 {
			return fmt.Sprintf("eventbridge received %d events, want 1", n)
		}
		return ""
	})
	got := aws.Events()[0]
	var e substate.Event
	if err := json.Unmarshal([]byte(got.Detail), &e); err != nil {
		t.Fatal(err)
	}
	if got.EventBusName != "tenants" || got.Source != "substate" || e.Data.TenantID != "acme" || e.Data.SubState != substate.StateFailed {
		t.Fatalf("entry on bus %q source %q: %+v", got.EventBusName, got.Source, e.Data)
	}
}
