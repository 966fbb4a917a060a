package engine

import (
	"strings"

	"github.com/theory/jsonpath"
	yaml "go.yaml.in/yaml/v4"
)

// path is a compiled JSONPath query (RFC 9535) that reads the state input.
type path struct {
	src      string
	p        *jsonpath.Path
	singular bool // selects at most one node ($.a.b, $.items[0])
}

// compilePath parses an RFC 9535 query; anything the RFC rejects is an error.
func compilePath(src string) (*path, error) {
	p, err := jsonpath.Parse(src)
	if err != nil {
		return nil, err
	}
	return &path{src: src, p: p, singular: p.Query().Singular() != nil}, nil
}

// lookup returns what the path selects in doc. A singular query yields the
// node itself and ok=false when there is none; any other query (wildcards,
// slices, filters, descendants) yields the list of selected nodes, possibly
// empty, and always ok.
func (p *path) lookup(doc any) (v any, ok bool) {
	nodes := p.p.Select(doc)
	if p.singular {
		if len(nodes) == 0 {
			return nil, false
		}
		return nodes[0], true
	}
	return append([]any{}, nodes...), true
}

// template is a task's parameters: JSON with JSONPath references. A key
// ending in ".$" takes the value its JSONPath selects from the state input,
// under the key without the suffix; every other value is a literal.
type template struct {
	lit    any // a literal scalar, when path, fields and items are unset
	path   *path
	fields []templateField // an object; nil with isObj for {}
	items  []*template     // an array; nil with isArr for []
	isObj  bool
	isArr  bool
}

type templateField struct {
	key string
	val *template
}

// template builds a parameters template from a YAML node.
func (p *parser) template(n *yaml.Node, st string, depth int) *template {
	n = p.deref(n)
	if depth > 64 {
		p.errorf(n, st, "parameters nested too deeply")
		return &template{}
	}
	switch n.Kind {
	case yaml.MappingNode:
		t := &template{isObj: true}
		for _, f := range p.fields(n, st, "parameters") {
			t.fields = append(t.fields, p.templateField(f, st, depth))
		}
		return t
	case yaml.SequenceNode:
		t := &template{isArr: true}
		for _, item := range n.Content {
			t.items = append(t.items, p.template(item, st, depth+1))
		}
		return t
	}
	v, err := scalarJSON(n)
	if err != nil {
		p.errorf(n, st, "parameters: %v", err)
	}
	return &template{lit: v}
}

func (p *parser) templateField(f field, st string, depth int) templateField {
	key, isPath := strings.CutSuffix(f.key, ".$")
	if !isPath {
		return templateField{key: key, val: p.template(f.val, st, depth+1)}
	}
	src, ok := p.str(field{key: "parameter " + f.key, val: f.val, stateCtx: st})
	if !ok {
		return templateField{key: key, val: &template{}}
	}
	q, err := compilePath(src)
	if err != nil {
		p.errorf(p.deref(f.val), st, "parameter %q: invalid JSONPath %q: %v", f.key, src, err)
		return templateField{key: key, val: &template{}}
	}
	return templateField{key: key, val: &template{path: q}}
}

// resolve builds the parameters' JSON value against the state input. A
// singular path that selects nothing is a PathError.
func (t *template) resolve(input any) (any, error) {
	switch {
	case t.path != nil:
		v, ok := t.path.lookup(input)
		if !ok {
			return nil, taskErrorf(ErrPath, "path %s selected nothing in the state input", t.path.src)
		}
		return v, nil
	case t.isObj:
		out := make(map[string]any, len(t.fields))
		for _, f := range t.fields {
			v, err := f.val.resolve(input)
			if err != nil {
				return nil, err
			}
			out[f.key] = v
		}
		return out, nil
	case t.isArr:
		out := make([]any, 0, len(t.items))
		for _, item := range t.items {
			v, err := item.resolve(input)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return t.lit, nil
}
