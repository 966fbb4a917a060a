package engine

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds the parser arbitrary text: it returns a definition or a
// list of positioned errors, and never panics.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("demo/order_processing.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		base, string(example), waitWorkflow, pollWorkflow, retryWorkflow, choiceWorkflow,
		`{"name":"j","version":"1","startAt":"a","states":{"a":{"type":"Success"}}}`,
		"a: &x [*x]\n", "a: !!binary aGk=\n", "states:\n  a: {type: Task, parameters: {x.$: \"$..[?@.a]\"}}\n",
		"\x00\xff", "- - - -", "{", "name: 1e999\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := Parse("fuzz.yaml", src)
		if err == nil {
			if d == nil || d.states[d.StartAt] == nil {
				t.Fatalf("valid definition without its start state: %+v", d)
			}
			return
		}
		var verrs ValidationErrors
		if !errors.As(err, &verrs) || len(verrs) == 0 {
			t.Fatalf("error %T %v, want ValidationErrors", err, err)
		}
		for _, e := range verrs {
			if e.Line < 1 || e.Col < 1 || e.Msg == "" {
				t.Fatalf("error without a position or message: %+v", e)
			}
		}
	})
}
