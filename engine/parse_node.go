package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

// nodeBudget bounds how many nodes one parse visits, so that aliases that
// expand exponentially cannot exhaust memory or time.
const nodeBudget = 100_000

// parser collects every problem of one definition.
type parser struct {
	file   string
	errs   ValidationErrors
	budget int
	broke  bool // the budget ran out; stop reporting
}

// field is one key/value pair of a mapping.
type field struct {
	key      string
	keyNode  *yaml.Node
	val      *yaml.Node
	stateCtx string
}

func (p *parser) errorf(n *yaml.Node, st, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, max(n.Column, 1)
	}
	p.errs = append(p.errs, &ValidationError{File: p.file, Line: line, Col: col, State: st, Msg: fmt.Sprintf(format, args...)})
}

// deref follows aliases and charges the node budget.
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	p.budget--
	if p.budget < 0 && !p.broke {
		p.broke = true
		p.errorf(n, "", "definition too large (more than %d nodes after expanding aliases)", nodeBudget)
	}
	if n == nil || n.Kind == yaml.AliasNode || p.broke {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: posOf(n).line, Column: posOf(n).col}
	}
	return n
}

func posOf(n *yaml.Node) pos {
	if n == nil {
		return pos{1, 1}
	}
	return pos{n.Line, n.Column}
}

// fields returns the pairs of a mapping node, reporting duplicate keys and a
// node that is not a mapping (then it returns nil).
func (p *parser) fields(n *yaml.Node, st, what string) []field {
	n = p.deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, st, "%s must be a mapping, not %s", what, kindName(n))
		return nil
	}
	seen := map[string]bool{}
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, st, "%s keys must be strings", what)
			continue
		}
		if seen[k.Value] {
			p.errorf(k, st, "duplicate key %q in %s", k.Value, what)
			continue
		}
		seen[k.Value] = true
		out = append(out, field{key: k.Value, keyNode: k, val: v, stateCtx: st})
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}

// str returns a field's value as a non-empty string.
func (p *parser) str(f field) (string, bool) {
	v := p.deref(f.val)
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" || v.Value == "" {
		p.errorf(v, f.stateCtx, "%s must be a non-empty string, not %s", f.key, kindName(v))
		return "", false
	}
	return v.Value, true
}

// ref returns a field's value as a reference to a state.
func (p *parser) ref(f field) ref {
	s, _ := p.str(f)
	return ref{name: s, pos: posOf(p.deref(f.val))}
}

// number returns a field's value as a finite number.
func (p *parser) number(f field) (float64, bool) {
	v := p.deref(f.val)
	tag := v.ShortTag()
	if v.Kind == yaml.ScalarNode && (tag == "!!int" || tag == "!!float") {
		var x float64
		if err := v.Decode(&x); err == nil && !math.IsInf(x, 0) && !math.IsNaN(x) {
			return x, true
		}
	}
	p.errorf(v, f.stateCtx, "%s must be a number, not %s", f.key, kindName(v))
	return 0, false
}

// boolean returns a field's value as a boolean.
func (p *parser) boolean(f field) (bool, bool) {
	v := p.deref(f.val)
	var b bool
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" && v.Decode(&b) == nil {
		return b, true
	}
	p.errorf(v, f.stateCtx, "%s must be true or false, not %s", f.key, kindName(v))
	return false, false
}

// seconds returns a field's value as a duration in seconds (fractions allowed).
func (p *parser) seconds(f field, allowZero bool) (time.Duration, bool) {
	x, ok := p.number(f)
	if !ok {
		return 0, false
	}
	if x < 0 || (x == 0 && !allowZero) || x > 366*24*3600*100 {
		p.errorf(p.deref(f.val), f.stateCtx, "%s must be a positive number of seconds", f.key)
		return 0, false
	}
	return time.Duration(x * float64(time.Second)), true
}

// scalarJSON converts a scalar node to a JSON value.
func scalarJSON(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		var u uint64
		err := n.Decode(&u)
		return json.Number(strconv.FormatUint(u, 10)), err
	case "!!float":
		var x float64
		if err := n.Decode(&x); err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%q is not a JSON number", n.Value)
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	}
	return n.Value, nil
}
