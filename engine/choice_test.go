package engine

import (
	"fmt"
	"testing"

	"github.com/substatehq/substate/internal/jsonx"
)

// TestCondition checks every operator against matching, failing, missing
// and mistyped values.
func TestCondition(t *testing.T) {
	input := `{"s":"beta","n":10,"f":2.5,"b":true,"nul":null,"arr":[1,"two"],"big":12345678901234567891}`
	for _, tc := range []struct {
		cond string
		want bool
	}{
		{`{variable: $.s, stringEquals: beta}`, true},
		{`{variable: $.s, stringEquals: alpha}`, false},
		{`{variable: $.n, stringEquals: "10"}`, false}, // a number is not a string
		{`{variable: $.missing, stringEquals: beta}`, false},
		{`{variable: $.s, stringLessThan: gamma}`, true},
		{`{variable: $.s, stringLessThan: alpha}`, false},
		{`{variable: $.s, stringGreaterThan: alpha}`, true},
		{`{variable: $.s, stringGreaterThan: beta}`, false},
		{`{variable: $.n, numericEquals: 10}`, true},
		{`{variable: $.n, numericEquals: 10.0}`, true},
		{`{variable: $.f, numericEquals: 2.5}`, true},
		{`{variable: $.big, numericEquals: 12345678901234567890}`, false}, // exact, no float rounding
		{`{variable: $.big, numericGreaterThan: 12345678901234567890}`, true},
		{`{variable: $.s, numericEquals: 10}`, false},
		{`{variable: $.n, numericLessThan: 11}`, true},
		{`{variable: $.n, numericLessThan: 10}`, false},
		{`{variable: $.f, numericGreaterThan: 2}`, true},
		{`{variable: $.f, numericGreaterThan: 1e3}`, false},
		{`{variable: $.missing, numericLessThan: 100}`, false},
		{`{variable: $.b, booleanEquals: true}`, true},
		{`{variable: $.b, booleanEquals: false}`, false},
		{`{variable: $.s, booleanEquals: true}`, false},
		{`{variable: $.s, isPresent: true}`, true},
		{`{variable: $.missing, isPresent: true}`, false},
		{`{variable: $.missing, isPresent: false}`, true},
		{`{variable: $.nul, isPresent: true}`, true},
		{`{variable: $.nul, isNull: true}`, true},
		{`{variable: $.s, isNull: true}`, false},
		{`{variable: $.s, isNull: false}`, true},
		{`{variable: $.missing, isNull: true}`, false},
		{`{variable: "$.arr[1]", stringEquals: two}`, true},
		{`{variable: "$.arr[0]", numericEquals: 1}`, true},
		{`{variable: "$.arr[5]", isPresent: false}`, true},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			src := base + fmt.Sprintf("  c:\n    type: Choice\n    choices:\n      - condition: %s\n        next: b\n", tc.cond)
			d, err := Parse("wf.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			doc, _ := jsonx.Decode([]byte(input))
			c := d.states["c"].choices[0].cond
			if got := c.eval(doc); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

const choiceWorkflow = `
name: choose
version: "1"
startAt: pick
states:
  pick:
    type: Choice
    choices:
      - condition: {variable: $.status, stringEquals: approved}
        next: approved
      - condition: {variable: $.amount, numericGreaterThan: 1000}
        next: review
    default: rejected
  approved:
    type: Success
  review:
    type: Success
  rejected:
    type: Fail
    error: Rejected
    cause: not approved
`

const choiceNoDefault = `
name: choose_strict
version: "1"
startAt: pick
states:
  pick:
    type: Choice
    choices:
      - condition: {variable: $.status, stringEquals: approved}
        next: approved
  approved:
    type: Success
`

func TestChoiceState(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, def, input, want string
	}{
		{"First", choiceWorkflow, `{"status":"approved","amount":5000}`, "approved:succeeded"},
		{"Second", choiceWorkflow, `{"status":"pending","amount":5000}`, "review:succeeded"},
		{"Default", choiceWorkflow, `{"status":"pending","amount":5}`, "rejected:failed"},
		{"ErrNoChoiceMatched", choiceNoDefault, `{"status":"pending"}`, "pick:failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.start(t, tc.def, tc.name, tc.input)
			h.final(t, tc.name)
			if got := statuses(h.rec.Events(), tc.name); got != tc.want {
				t.Errorf("events %q, want %q (Choice states emit nothing)", got, tc.want)
			}
		})
	}
	ev := h.final(t, "ErrNoChoiceMatched")
	if ev.ErrorType != ErrNoChoiceMatched {
		t.Errorf("error type %q, want %q", ev.ErrorType, ErrNoChoiceMatched)
	}
	ev = h.final(t, "Default")
	if ev.ErrorType != "Rejected" || ev.Error != "not approved" {
		t.Errorf("fail event %+v, want the Fail state's error and cause", ev)
	}
}
