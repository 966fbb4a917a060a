package engine

import (
	"encoding/json"
	"math/big"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// The nine comparison operators of a Choice condition.
const (
	opStringEquals       = "stringEquals"
	opStringLessThan     = "stringLessThan"
	opStringGreaterThan  = "stringGreaterThan"
	opNumericEquals      = "numericEquals"
	opNumericLessThan    = "numericLessThan"
	opNumericGreaterThan = "numericGreaterThan"
	opBooleanEquals      = "booleanEquals"
	opIsPresent          = "isPresent"
	opIsNull             = "isNull"
)

var operators = []string{
	opStringEquals, opStringLessThan, opStringGreaterThan,
	opNumericEquals, opNumericLessThan, opNumericGreaterThan,
	opBooleanEquals, opIsPresent, opIsNull,
}

// condition compares the value a singular JSONPath selects with a literal.
type condition struct {
	variable *path
	op       string
	str      string
	num      *big.Rat
	b        bool
}

// condition parses a Choice rule's condition mapping.
func (p *parser) condition(n *yaml.Node, st string) condition {
	var c condition
	var opField *field
	for _, f := range p.fields(n, st, "condition") {
		switch {
		case f.key == "variable":
			c.variable = p.choicePath(f)
		case isOperator(f.key):
			if opField != nil {
				p.errorf(f.keyNode, st, "condition has two operators, %s and %s", opField.key, f.key)
				continue
			}
			opField = &f
			c.op = f.key
			p.operand(&c, f)
		default:
			p.errorf(f.keyNode, st, "unknown field %q in condition (operators: %s)", f.key, strings.Join(operators, ", "))
		}
	}
	if c.variable == nil && !p.hasKey(n, "variable") {
		p.errorf(p.deref(n), st, "condition has no variable")
	}
	if opField == nil {
		p.errorf(p.deref(n), st, "condition has no operator (one of %s)", strings.Join(operators, ", "))
	}
	return c
}

func (p *parser) hasKey(n *yaml.Node, key string) bool {
	n = p.deref(n)
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func isOperator(key string) bool {
	for _, op := range operators {
		if op == key {
			return true
		}
	}
	return false
}

// choicePath compiles a condition's variable, which must select one node.
func (p *parser) choicePath(f field) *path {
	src, ok := p.str(f)
	if !ok {
		return nil
	}
	q, err := compilePath(src)
	if err != nil {
		p.errorf(p.deref(f.val), f.stateCtx, "variable: invalid JSONPath %q: %v", src, err)
		return nil
	}
	if !q.singular {
		p.errorf(p.deref(f.val), f.stateCtx, "variable: JSONPath %q can select several values; use a singular query such as $.a.b or $.items[0]", src)
		return nil
	}
	return q
}

// operand reads the literal an operator compares with.
func (p *parser) operand(c *condition, f field) {
	switch c.op {
	case opStringEquals, opStringLessThan, opStringGreaterThan:
		c.str, _ = p.scalarString(f)
	case opNumericEquals, opNumericLessThan, opNumericGreaterThan:
		if x, ok := p.number(f); ok {
			c.num = new(big.Rat).SetFloat64(x)
			if r, ok := new(big.Rat).SetString(p.deref(f.val).Value); ok {
				c.num = r // exact decimal, when the text is plain decimal
			}
		}
	default:
		c.b, _ = p.boolean(f)
	}
}

// scalarString returns any non-null scalar's text (a string comparison with
// 42 compares with "42").
func (p *parser) scalarString(f field) (string, bool) {
	v := p.deref(f.val)
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.errorf(v, f.stateCtx, "%s must be a string, not %s", f.key, kindName(v))
		return "", false
	}
	return v.Value, true
}

// eval reports whether the condition holds for the state input. A value of
// the wrong type (a string compared numerically) makes it false, not an error.
func (c *condition) eval(input any) bool {
	if c.variable == nil {
		return false
	}
	v, present := c.variable.lookup(input)
	switch c.op {
	case opIsPresent:
		return present == c.b
	case opIsNull:
		return (present && v == nil) == c.b
	case opBooleanEquals:
		b, ok := v.(bool)
		return present && ok && b == c.b
	case opStringEquals, opStringLessThan, opStringGreaterThan:
		s, ok := v.(string)
		return present && ok && compareMatches(c.op, strings.Compare(s, c.str))
	}
	r, ok := toRat(v)
	return present && ok && c.num != nil && compareMatches(c.op, r.Cmp(c.num))
}

func compareMatches(op string, cmp int) bool {
	switch op {
	case opStringEquals, opNumericEquals:
		return cmp == 0
	case opStringLessThan, opNumericLessThan:
		return cmp < 0
	}
	return cmp > 0
}

// toRat converts a JSON number (json.Number or float64) to an exact rational.
func toRat(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(n))
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	}
	return nil, false
}
