package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

func TestRunForwardsToEventBridge(t *testing.T) {
	aws := awstest.New(t)
	awstest.Env(t, aws.URL, awstest.Region)
	w := workertest.Start(t, func(f *worker.Flags) { f.EventBridgeBus = "tenants" })
	if code := workertest.PostFile(t, w.HTTP.URL()+"/v1/ingest/eventbridge", workertest.ExamplePath(t, "stepfunctions-failed.json"), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
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
