package mapping_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

func TestMapEventBridge(t *testing.T) {
	m := newMapper(t)
	mapOne := func(t *testing.T, body []byte) substate.EventData {
		t.Helper()
		return mustMap(t, m, substate.RawEventBridge, body)[0]
	}
	t.Run("ErrorMessageFromJSONCause", func(t *testing.T) {
		ev := mapOne(t, sfnEvent(t, "FAILED", map[string]any{"error": "Boom", "cause": `{"errorMessage":"disk full","errorType":"Boom"}`}))
		if got, want := ev.ErrorMessage, "disk full"; got != want {
			t.Errorf("errorMessage = %q, want %q", got, want)
		}
		if got, want := ev.ErrorType, "Boom"; got != want {
			t.Errorf("errorType = %q, want %q", got, want)
		}
	})
	t.Run("ErrorMessageFromTextCause", func(t *testing.T) {
		tests := []struct{ errName, cause, want string }{
			{"States.TaskFailed", "quota exceeded", "States.TaskFailed: quota exceeded"},
			{"", "quota exceeded", "quota exceeded"},
			{"States.Timeout", "", "States.Timeout"},
			{"Boom", `{"message":"from ecs"}`, "from ecs"},
			{"Boom", `{"other":1}`, `Boom: {"other":1}`},
			{"Boom", `{not json`, "Boom: {not json"},
			// The first line is the message; a trace after it stays in the raw event.
			{"Boom", "Traceback (most recent call last):\n  File \"app.py\", line 3", "Boom: Traceback (most recent call last):"},
			{"Boom", `{"errorMessage":"disk full\n  at write (fs.js:1:1)","stackTrace":["at x"]}`, "disk full"},
			{"Boom", "\n\n  quota exceeded\n  at y", "Boom: quota exceeded"},
		}
		for _, tt := range tests {
			ev := mapOne(t, sfnEvent(t, "FAILED", map[string]any{"error": tt.errName, "cause": tt.cause}))
			if got := ev.ErrorMessage; got != tt.want {
				t.Errorf("error %q cause %q: errorMessage = %q, want %q", tt.errName, tt.cause, got, tt.want)
			}
		}
	})
	t.Run("OccurredAt", func(t *testing.T) {
		start, stop, redrive := time.UnixMilli(1718791230123).UTC(), time.UnixMilli(1718791262338).UTC(), time.UnixMilli(1718791300000).UTC()
		envelope := time.Date(2024, 6, 19, 10, 0, 30, 0, time.UTC)
		tests := []struct {
			name   string
			status string
			set    map[string]any
			want   time.Time
		}{
			{"TerminalStop", "FAILED", nil, stop},
			{"RunningStart", "RUNNING", nil, start},
			{"RunningRedrive", "RUNNING", map[string]any{"redriveDate": 1718791300000, "redriveCount": 1}, redrive},
			{"NoDatesEnvelope", "RUNNING", map[string]any{"startDate": nil}, envelope},
			{"TerminalNoStopEnvelope", "SUCCEEDED", map[string]any{"stopDate": nil}, envelope},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ev := mapOne(t, sfnEvent(t, tt.status, tt.set))
				if got := ev.OccurredAt; !got.Equal(tt.want) {
					t.Errorf("occurredAt = %v, want %v", got, tt.want)
				}
			})
		}
	})
	t.Run("RevisionOrdersRedrives", func(t *testing.T) {
		running0 := mapOne(t, sfnEvent(t, "RUNNING", nil)).Revision
		failed0 := mapOne(t, sfnEvent(t, "FAILED", nil)).Revision
		running1 := mapOne(t, sfnEvent(t, "RUNNING", map[string]any{"redriveCount": 1, "redriveDate": 1718791300000})).Revision
		succeeded1 := mapOne(t, sfnEvent(t, "SUCCEEDED", map[string]any{"redriveCount": 1})).Revision
		if !(running0 < failed0 && failed0 < running1 && running1 < succeeded1) {
			t.Errorf("revisions not ordered RUNNING < FAILED < RUNNING(redrive) < SUCCEEDED: %d %d %d %d", running0, failed0, running1, succeeded1)
		}
		if got, want := running1, mapping.StepFunctionsRevision(1, mapping.RankActive, 0); got != want {
			t.Errorf("revision = %d, want %d", got, want)
		}
	})
	t.Run("ExcludedInputFallsBackToName", func(t *testing.T) {
		m := mappingWithRules(t, "input:$.tenantId", "name:^(?P<tenant>[a-z0-9-]+)--")
		body := sfnEvent(t, "RUNNING", map[string]any{"input": nil, "inputDetails": map[string]any{"included": false}})
		ev := mustMap(t, m, substate.RawEventBridge, body)[0]
		if got, want := ev.TenantID, "acme"; got != want {
			t.Errorf("tenant = %q, want %q", got, want)
		}
		body = sfnEvent(t, "RUNNING", map[string]any{"input": `{"tenantId":"hidden"}`, "inputDetails": map[string]any{"included": false}})
		if got, want := mustMap(t, m, substate.RawEventBridge, body)[0].TenantID, "acme"; got != want {
			t.Errorf("excluded input used: tenant = %q, want %q", got, want)
		}
	})
	t.Run("ArchiveReplay", func(t *testing.T) {
		body := strings.Replace(string(fixture(t, "sfn-status-failed.json")), `"version": "0",`, `"version": "0", "replay-name": "replay-2024-06-19",`, 1)
		got := mapOne(t, []byte(body))
		want := mapOne(t, fixture(t, "sfn-status-failed.json"))
		if got != want {
			t.Errorf("replayed event maps to %+v, want %+v", got, want)
		}
	})
	t.Run("OnlyRequiredFields", func(t *testing.T) {
		body := `{"id":"x","source":"aws.states","detail-type":"Step Functions Execution Status Change","time":"2024-06-19T10:00:30Z",
			"detail":{"executionArn":"arn:aws:states:us-east-1:1:execution:sm:acme--1","status":"RUNNING","input":"{\"tenantId\":\"acme\"}"}}`
		ev := mapOne(t, []byte(body))
		if ev.Workflow != "sm" || ev.TenantID != "acme" || !ev.OccurredAt.Equal(time.Date(2024, 6, 19, 10, 0, 30, 0, time.UTC)) {
			t.Errorf("got %+v", ev)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		tests := []struct{ name, body, mention string }{
			{"NotJSON", `{`, "decode"},
			{"DetailType", `{"id":"x","source":"aws.states","detail-type":"Step Functions State Machine Status Change","detail":{}}`, "State Machine Status Change"},
			{"Source", `{"id":"x","source":"aws.ec2","detail-type":"Step Functions Execution Status Change","detail":{}}`, "aws.ec2"},
			{"NoDetail", `{"id":"x","source":"aws.states","detail-type":"Step Functions Execution Status Change"}`, "executionArn"},
			{"BadDate", `{"id":"x","source":"aws.states","detail-type":"Step Functions Execution Status Change","detail":{"executionArn":"a","status":"RUNNING","startDate":"yesterday"}}`, "decode"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := m.Map(substate.RawEvent{Kind: substate.RawEventBridge, Body: []byte(tt.body)})
				wantCode(t, err, substate.EINVALID)
				if !strings.Contains(err.Error(), tt.mention) {
					t.Errorf("error %q does not mention %q", err, tt.mention)
				}
			})
		}
	})
}

// A decoded event is reused for the next: what one event said must not
// show in the next one's, which leaves it out. The real deliveries in the
// fixtures write every field, null or not; a payload that leaves fields
// out (forged, or a later shape) must still map only what it says.
func TestMapEventBridgeForgetsTheEventBefore(t *testing.T) {
	const head = `{"id":"e-1","detail-type":"Step Functions Execution Status Change","source":"aws.states","time":"2024-06-19T10:00:30Z",` +
		`"detail":{"executionArn":"arn:aws:states:us-east-1:123456789012:execution:order-fulfillment:ord-1",`
	failed := []byte(head + `"status":"FAILED","startDate":1718791230123,"stopDate":1718791262338,"redriveCount":2,` +
		`"input":"{\"customerId\":\"cus_1\"}","error":"States.TaskFailed","cause":"boom"}}`)
	running := []byte(head + `"status":"RUNNING","input":"{\"customerId\":\"cus_2\"}"}}`)
	want, err := newMapper(t).MapEventBridge(running)
	if err != nil {
		t.Fatal(err)
	}
	m := newMapper(t)
	for range 3 {
		if _, err := m.MapEventBridge(failed); err != nil {
			t.Fatal(err)
		}
		got, err := m.MapEventBridge(running)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("running after failed: %+v, want %+v", got, want)
		}
	}
}
