package mapping

import (
	"bytes"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/fixtures"
)

// pointerEvent is eventBridgeEvent as it was declared before its
// pointers became values: the oracle of FuzzEventBridgeValues.
type pointerEvent struct {
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Source     string         `json:"source"`
	Time       time.Time      `json:"time"`
	ReplayName string         `json:"replay-name"`
	Detail     *pointerDetail `json:"detail"`
}

type pointerDetail struct {
	ExecutionARN    string      `json:"executionArn"`
	StateMachineARN string      `json:"stateMachineArn"`
	Name            string      `json:"name"`
	Status          string      `json:"status"`
	StartDate       epochMillis `json:"startDate"`
	StopDate        epochMillis `json:"stopDate"`
	Input           *string     `json:"input"`
	InputDetails    *struct {
		Included *bool `json:"included"`
	} `json:"inputDetails"`
	RedriveCount int         `json:"redriveCount"`
	RedriveDate  epochMillis `json:"redriveDate"`
	Error        string      `json:"error"`
	Cause        string      `json:"cause"`
}

// input is what the pointer form made of the execution input.
func (d *pointerDetail) input() []byte {
	if d.Input == nil || *d.Input == "" {
		return nil
	}
	if d.InputDetails != nil && d.InputDetails.Included != nil && !*d.InputDetails.Included {
		return nil
	}
	return []byte(*d.Input)
}

// FuzzEventBridgeValues: the value fields decode every payload as the
// pointers did: the same refusals, the same fields, the same input kept
// or dropped (absent, null, excluded, duplicated names).
func FuzzEventBridgeValues(f *testing.F) {
	for _, name := range fixtures.Providers("sfn-status-*.json") {
		f.Add(fixtures.Provider(name))
	}
	for _, s := range []string{
		`{"detail":{"executionArn":"a","status":"RUNNING","input":"{}","inputDetails":{"included":false}}}`,
		`{"detail":{"input":"{\"t\":1}","inputDetails":{"included":true}}}`,
		`{"detail":{"input":"x","inputDetails":{"included":null}}}`,
		`{"detail":{"input":"x","inputDetails":null}}`,
		`{"detail":{"input":null,"input":"y"}}`,
		`{"detail":null}`,
		`{"detail":{"status":"A"},"detail":{"executionArn":"b"}}`,
		`{"detail":{"inputDetails":{"included":false,"included":null},"input":"z"}}`,
		`{"detail":{"inputDetails":{"included":"false"}}}`,
		`{"detail":{"inputDetails":{"included":1}}}`,
		`{"detail":5}`,
		`{"detail":{"input":5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var was pointerEvent
		var is eventBridgeEvent
		errWas, errIs := decode(body, &was), decode(body, &is)
		if (errWas == nil) != (errIs == nil) {
			t.Fatalf("%s: pointers %v, values %v", body, errWas, errIs)
		}
		if errWas != nil {
			return
		}
		if was.ID != is.ID || was.DetailType != is.DetailType || was.Source != is.Source || !was.Time.Equal(is.Time) || was.ReplayName != is.ReplayName {
			t.Fatalf("%s: envelope %+v, values %+v", body, was, is)
		}
		d := was.Detail
		if d == nil {
			d = &pointerDetail{}
		}
		v := &is.Detail
		if d.ExecutionARN != v.ExecutionARN || d.StateMachineARN != v.StateMachineARN || d.Name != v.Name || d.Status != v.Status ||
			!d.StartDate.Equal(v.StartDate.Time) || !d.StopDate.Equal(v.StopDate.Time) || !d.RedriveDate.Equal(v.RedriveDate.Time) ||
			d.RedriveCount != v.RedriveCount || d.Error != v.Error || d.Cause != v.Cause {
			t.Fatalf("%s: detail %+v, values %+v", body, *d, *v)
		}
		if a, b := d.input(), sfnInput(v.Input, v.InputDetails); !bytes.Equal(a, b) || (a == nil) != (b == nil) {
			t.Fatalf("%s: input %q, values %q", body, a, b)
		}
	})
}
