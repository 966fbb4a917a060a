package engine

import (
	"errors"
	"strings"
	"testing"
)

// base is a valid definition that the cases below break one rule at a time.
const base = `name: wf
version: "1"
startAt: a
states:
  a:
    type: Task
    resource: svc.op
    next: b
  b:
    type: Success
`

func TestParse(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		d, err := Parse("wf.yaml", []byte(base))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(d.States(), ","), "a,b"; got != want {
			t.Errorf("states %q, want %q", got, want)
		}
		if d.Name != "wf" || d.Version != "1" || d.StartAt != "a" {
			t.Errorf("definition %+v", d)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		src := "{\n\t\"name\": \"wf\", \"version\": 1.0, \"startAt\": \"a\",\n\t\"states\": {\n\t\t\"a\": {\"type\": \"Task\", \"resource\": \"svc.op\", \"next\": \"zz\"},\n\t\t\"b\": {\"type\": \"Success\"}\n\t}\n}\n"
		_, err := Parse("wf.json", []byte(src))
		if got, want := errText(err), `wf.json:4:55: state "a": next state "zz" does not exist`; !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant %s", got, want)
		}
	})
	// YAML accepts a trailing comma in a flow mapping; a .json file must be
	// strict JSON, and its syntax error points at the place.
	t.Run("ErrJSONSyntax", func(t *testing.T) {
		src := "{\n  \"name\": \"wf\", \"version\": \"1\",\n  \"startAt\": \"a\",\n  \"states\": {\"a\": {\"type\": \"Success\"}},\n}\n"
		if _, err := Parse("wf.yaml", []byte(src)); err != nil {
			t.Fatalf("as YAML: %v", err)
		}
		_, err := Parse("wf.json", []byte(src))
		if got, want := errText(err), "wf.json:5:1: invalid JSON: invalid character '}' looking for beginning of object key string"; !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant %s", got, want)
		}
	})
	t.Run("Example", func(t *testing.T) {
		if _, err := ParseFile("demo/order_processing.yaml"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrRead", func(t *testing.T) {
		_, err := ParseFile("testdata/missing.yaml")
		var verrs ValidationErrors
		if err == nil || errors.As(err, &verrs) {
			t.Fatalf("err %v, want a read error", err)
		}
	})
}

// TestValidate breaks each rule and checks the message and its position.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"Syntax", "name: [wf\n", `wf.yaml:2:1: did not find expected ',' or ']'`},
		{"Empty", "", `wf.yaml:1:1: definition is empty`},
		{"NotMapping", "- a\n", `wf.yaml:1:1: workflow definition must be a mapping, not a list`},
		{"MissingField", strings.Replace(base, "version: \"1\"\n", "", 1), `wf.yaml:1:1: missing required field "version"`},
		{"UnknownTopField", base + "extra: 1\n", `wf.yaml:11:1: unknown field "extra"`},
		{"DuplicateKey", base + "name: again\n", `wf.yaml:11:1: duplicate key "name" in workflow definition`},
		{"StartAtMissing", strings.Replace(base, "startAt: a", "startAt: nope", 1), `wf.yaml:3:10: startAt names state "nope", which does not exist`},
		{"NextMissing", strings.Replace(base, "next: b", "next: nope", 1), `wf.yaml:8:11: state "a": next state "nope" does not exist`},
		{"NoTerminalReachable", strings.Replace(base, "startAt: a", "startAt: c", 1) + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, isPresent: true}\n        next: c\n",
			`wf.yaml:3:10: no Success or Fail state is reachable from "c"`},
		{"TerminalNext", base + "    next: a\n", `wf.yaml:11:5: state "b": a Success state is terminal and cannot have next`},
		{"FailNext", base + "  f:\n    type: Fail\n    next: a\n", `wf.yaml:13:5: state "f": a Fail state is terminal and cannot have next`},
		{"TaskNoResource", strings.Replace(base, "    resource: svc.op\n", "", 1), `wf.yaml:5:3: state "a": a Task state needs resource`},
		{"TaskNoNext", strings.Replace(base, "    next: b\n", "", 1), `wf.yaml:5:3: state "a": a Task state needs next`},
		{"TaskBadResource", strings.Replace(base, "svc.op", "svc", 1), `wf.yaml:7:15: state "a": resource "svc" must be "service.operation"`},
		{"TaskBadTimeout", strings.Replace(base, "next: b", "next: b\n    timeout: 0", 1), `wf.yaml:9:14: state "a": timeout must be a positive number of seconds`},
		{"ChoiceNoChoices", base + "  c:\n    type: Choice\n    default: b\n", `wf.yaml:11:3: state "c": a Choice state needs choices`},
		{"ChoiceEmpty", base + "  c:\n    type: Choice\n    choices: []\n", `wf.yaml:13:14: state "c": choices must be a non-empty list`},
		{"ChoiceNoOperator", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x}\n        next: b\n",
			`wf.yaml:14:20: state "c": condition has no operator`},
		{"ChoiceTwoOperators", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, isNull: true, isPresent: true}\n        next: b\n",
			`wf.yaml:14:50: state "c": condition has two operators, isNull and isPresent`},
		{"ChoiceUnknownOperator", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, stringMatches: a}\n        next: b\n",
			`wf.yaml:14:36: state "c": unknown field "stringMatches" in condition`},
		{"ChoiceOperandType", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, numericEquals: ten}\n        next: b\n",
			`wf.yaml:14:51: state "c": numericEquals must be a number, not "ten"`},
		{"ChoiceNoNext", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, isNull: true}\n",
			`wf.yaml:14:9: state "c": choice has no next`},
		{"ChoiceDefaultMissing", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, isNull: true}\n        next: b\n    default: nope\n",
			`wf.yaml:16:14: state "c": next state "nope" does not exist`},
		{"ChoiceBadPath", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: \"$.x[\", isNull: true}\n        next: b\n",
			`wf.yaml:14:31: state "c": variable: invalid JSONPath "$.x["`},
		{"ChoicePluralPath", base + "  c:\n    type: Choice\n    choices:\n      - condition: {variable: \"$.x[*]\", isNull: true}\n        next: b\n",
			`wf.yaml:14:31: state "c": variable: JSONPath "$.x[*]" can select several values`},
		{"WaitNeither", base + "  w:\n    type: Wait\n    next: b\n", `wf.yaml:11:3: state "w": a Wait state needs exactly one of seconds and timestamp`},
		{"WaitBoth", base + "  w:\n    type: Wait\n    seconds: 1\n    timestamp: \"2030-01-01T00:00:00Z\"\n    next: b\n",
			`wf.yaml:11:3: state "w": a Wait state needs exactly one of seconds and timestamp`},
		{"WaitBadTimestamp", base + "  w:\n    type: Wait\n    timestamp: tomorrow\n    next: b\n", `wf.yaml:13:16: state "w": timestamp "tomorrow" must be RFC 3339`},
		{"WaitNegative", base + "  w:\n    type: Wait\n    seconds: -1\n    next: b\n", `wf.yaml:13:14: state "w": seconds must be a positive number of seconds`},
		{"WaitNoNext", base + "  w:\n    type: Wait\n    seconds: 1\n", `wf.yaml:11:3: state "w": a Wait state needs next`},
		{"UnknownStateField", strings.Replace(base, "next: b", "next: b\n    nxt: b", 1), `wf.yaml:9:5: state "a": unknown field "nxt"`},
		{"FieldOfOtherType", strings.Replace(base, "next: b", "next: b\n    seconds: 3", 1), `wf.yaml:9:5: state "a": field "seconds" is not allowed in a Task state`},
		{"UnknownType", base + "  p:\n    type: Parallel\n", `wf.yaml:12:11: state "p": unknown state type "Parallel"`},
		{"NoType", base + "  p:\n    next: b\n", `wf.yaml:12:5: state "p": missing required field "type"`},
		{"BadParameterPath", strings.Replace(base, "next: b", "next: b\n    parameters:\n      id.$: \"$.items[0\"", 1),
			`wf.yaml:10:13: state "a": parameter "id.$": invalid JSONPath "$.items[0"`},
		{"RetryFields", strings.Replace(base, "next: b", "next: b\n    retry:\n      maxAttempts: 1.5\n      backoffMultiplier: 0.5\n      tries: 3", 1),
			`wf.yaml:10:20: state "a": maxAttempts must be a whole number from 0 to 1000`},
		{"RetryMultiplier", strings.Replace(base, "next: b", "next: b\n    retry:\n      backoffMultiplier: 0.5", 1),
			`wf.yaml:10:26: state "a": backoffMultiplier must be from 1 to 100`},
		{"RetryUnknown", strings.Replace(base, "next: b", "next: b\n    retry:\n      tries: 3", 1), `wf.yaml:10:7: state "a": unknown field "tries" in retry`},
		{"CatchMissingNext", strings.Replace(base, "next: b", "next: b\n    catch:\n      - errorType: \"*\"", 1), `wf.yaml:10:9: state "a": catch entry has no next`},
		{"CatchNextMissing", strings.Replace(base, "next: b", "next: b\n    catch:\n      - errorType: \"*\"\n        next: nope", 1),
			`wf.yaml:11:15: state "a": next state "nope" does not exist`},
		{"LoopWithoutExit", strings.Replace(base, "next: b", "next: c", 1) + "  c:\n    type: Wait\n    seconds: 1\n    next: a\n",
			`wf.yaml:5:3: state "a": states "a", "c" form a loop that can never be left: no next, catch, choice or default of theirs leads out of it`},
		{"SelfLoop", base + "  s:\n    type: Wait\n    seconds: 1\n    next: s\n", `wf.yaml:11:3: state "s": states "s" form a loop that can never be left`},
		// A Task whose next and catch both stay in the loop: success and
		// failure alike go round again.
		{"LoopNextAndCatchInside", base + "  p:\n    type: Task\n    resource: svc.poll\n    next: w\n    catch:\n      - errorType: \"*\"\n        next: w\n  w:\n    type: Wait\n    seconds: 1\n    next: p\n",
			`wf.yaml:11:3: state "p": states "p", "w" form a loop that can never be left`},
		// A Choice on the loop is no way out when every rule and the
		// default lead back into it.
		{"LoopChoiceAllInside", base + "  p:\n    type: Task\n    resource: svc.poll\n    next: c\n  c:\n    type: Choice\n    choices:\n      - condition: {variable: $.x, isNull: true}\n        next: p\n    default: p\n",
			`wf.yaml:11:3: state "p": states "p", "c" form a loop that can never be left`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("wf.yaml", []byte(tc.src))
			if got := errText(err); !strings.Contains(got, tc.want) {
				t.Errorf("errors:\n%s\nwant a line containing\n%s", got, tc.want)
			}
			var verrs ValidationErrors
			if !errors.As(err, &verrs) {
				t.Fatalf("err %T, want ValidationErrors", err)
			}
		})
	}
}

// TestValidateLoops checks loops that can be left: through a Choice, and
// through a Task whose catch leads round a Wait back to it while its next
// leads out (polling until the task succeeds).
func TestValidateLoops(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"ThroughChoice", base + `  poll:
    type: Task
    resource: svc.status
    next: ready
  ready:
    type: Choice
    choices:
      - condition: {variable: $.done, booleanEquals: true}
        next: b
    default: pause
  pause:
    type: Wait
    seconds: 5
    next: poll
`},
		{"CatchToWait", catchLoopWorkflow},
		{"CatchToTask", strings.Replace(base, "next: b", "next: b\n    catch:\n      - errorType: \"*\"\n        next: h", 1) + "  h:\n    type: Task\n    resource: svc.fix\n    next: a\n"},
		{"LeftOnlyByFailure", strings.Replace(base, "next: b", "next: a\n    catch:\n      - errorType: \"*\"\n        next: b", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse("wf.yaml", []byte(tc.src)); err != nil {
				t.Fatalf("a loop that can be left must be valid: %v", err)
			}
		})
	}
}

// TestValidateAllErrors checks that every problem is reported, in order.
func TestValidateAllErrors(t *testing.T) {
	src := `name: wf
startAt: nope
states:
  a:
    type: Task
    resource: svc
    next: b
  b:
    type: Success
    next: a
  w:
    type: Wait
    next: b
`
	_, err := Parse("wf.yaml", []byte(src))
	var verrs ValidationErrors
	if !errors.As(err, &verrs) {
		t.Fatalf("err %v", err)
	}
	want := []string{
		`wf.yaml:1:1: missing required field "version"`,
		`wf.yaml:2:10: startAt names state "nope", which does not exist`,
		`wf.yaml:6:15: state "a": resource "svc" must be "service.operation"`,
		`wf.yaml:10:5: state "b": a Success state is terminal and cannot have next`,
		`wf.yaml:11:3: state "w": a Wait state needs exactly one of seconds and timestamp`,
	}
	if got := errText(err); got != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if verrs[2].Line != 6 || verrs[2].Col != 15 || verrs[2].State != "a" || verrs[2].File != "wf.yaml" {
		t.Errorf("fields of %+v", verrs[2])
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
