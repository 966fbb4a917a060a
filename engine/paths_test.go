package engine

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/substatehq/substate/internal/jsonx"
)

// TestPathCompliance runs the RFC 9535 compliance suite through the
// engine's path evaluation: every valid selector selects exactly the
// expected nodes and every invalid one is rejected.
func TestPathCompliance(t *testing.T) {
	data, err := os.ReadFile("testdata/jsonpath-cts/cts.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []struct {
			Name     string          `json:"name"`
			Selector string          `json:"selector"`
			Document json.RawMessage `json:"document"`
			Result   json.RawMessage `json:"result"`
			Results  json.RawMessage `json:"results"`
			Invalid  bool            `json:"invalid_selector"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	if len(suite.Tests) < 700 {
		t.Fatalf("suite has %d cases", len(suite.Tests))
	}
	for _, tc := range suite.Tests {
		p, err := compilePath(tc.Selector)
		if tc.Invalid {
			if err == nil {
				t.Errorf("%s: %q accepted, want rejected", tc.Name, tc.Selector)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %q rejected: %v", tc.Name, tc.Selector, err)
			continue
		}
		doc, err := jsonx.Decode(tc.Document)
		if err != nil {
			t.Fatalf("%s: document: %v", tc.Name, err)
		}
		got := nodes(p, doc)
		if !matchesResult(got, tc.Result, tc.Results) {
			t.Errorf("%s: %q selected %s, want %s%s", tc.Name, tc.Selector, got, tc.Result, tc.Results)
		}
	}
}

// nodes is the node list a path selects, as normalized JSON.
func nodes(p *path, doc any) string {
	v, ok := p.lookup(doc)
	list := []any{}
	switch {
	case p.singular && ok:
		list = []any{v}
	case !p.singular:
		list = v.([]any)
	}
	b, _ := json.Marshal(list)
	return normJSON(b)
}

func matchesResult(got string, result, results json.RawMessage) bool {
	if result != nil {
		return got == normJSON(result)
	}
	var alts []json.RawMessage
	_ = json.Unmarshal(results, &alts)
	for _, alt := range alts {
		if got == normJSON(alt) {
			return true
		}
	}
	return false
}

// normJSON re-encodes JSON so that equal values compare equal as text
// (1.0 and 1 alike).
func normJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "invalid: " + string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestParameters(t *testing.T) {
	input := `{"order":{"id":"o-1","total":12.5},"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}],"tags":["x","y"],"big":12345678901234567890}`
	src := base + `  p:
    type: Task
    resource: svc.op
    next: b
    parameters:
      literal: value
      dollar: "$.not.a.path"
      number: 3
      orderId.$: $.order.id
      firstSku.$: $.items[0].sku
      lastQty.$: $.items[-1].qty
      skus.$: $.items[*].sku
      big.$: $.big
      nested:
        tag.$: $.tags[1]
        list: [1, {"total.$": "$.order.total"}]
      whole.$: $
`
	d, err := Parse("wf.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := jsonx.Decode([]byte(input))
	t.Run("OK", func(t *testing.T) {
		v, err := d.states["p"].params.resolve(doc)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		var got, want map[string]any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(`{"literal":"value","dollar":"$.not.a.path","number":3,"orderId":"o-1","firstSku":"a",
			"lastQty":1,"skus":["a","b"],"big":12345678901234567890,"nested":{"tag":"y","list":[1,{"total":12.5}]},"whole":`+input+`}`), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("parameters\n%s\nwant\n%v", b, want)
		}
		if !json.Valid(b) || !strings.Contains(string(b), `"big":12345678901234567890`) {
			t.Errorf("big number not kept exactly: %s", b)
		}
	})
	t.Run("ErrPath", func(t *testing.T) {
		short, _ := jsonx.Decode([]byte(`{"order":{"id":"o-1"},"items":[],"tags":[],"big":1}`))
		_, err := d.states["p"].params.resolve(short)
		te, ok := err.(*TaskError)
		if !ok || te.Type != ErrPath {
			t.Fatalf("err %v, want a PathError", err)
		}
	})
}
