package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// MaxDefinitionSize is the largest definition Parse accepts.
const MaxDefinitionSize = 1 << 20

// ParseFile reads and parses a definition file. Problems in the definition
// are returned as ValidationErrors; a file that cannot be read is an ordinary error.
func ParseFile(name string) (*Definition, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read definition: %w", err)
	}
	return Parse(name, src)
}

// Parse parses and validates a YAML or JSON definition (JSON is parsed as
// YAML, so both report positions the same way; a file named *.json must
// also be strict JSON). file names the source in
// error messages and may be empty. On any problem it returns nil and a
// ValidationErrors holding every problem found, in source order.
func Parse(file string, src []byte) (*Definition, error) {
	p := &parser{file: file, budget: nodeBudget}
	if len(src) > MaxDefinitionSize {
		p.errorf(nil, "", "definition is larger than %d bytes", MaxDefinitionSize)
		return nil, p.errs
	}
	if strings.EqualFold(filepath.Ext(file), ".json") && !p.strictJSON(src) {
		return nil, p.errs
	}
	root := p.load(src)
	if root == nil {
		return nil, p.errs
	}
	d := &Definition{Source: append([]byte(nil), src...), states: map[string]*state{}}
	p.workflow(d, root)
	if !p.broke {
		p.validate(d, root)
	}
	if len(p.errs) > 0 {
		sortErrors(p.errs)
		return nil, p.errs
	}
	return d, nil
}

// strictJSON reports a .json definition's JSON syntax error, which the
// YAML parser may accept (a trailing comma, say), at its line and column.
func (p *parser) strictJSON(src []byte) bool {
	var v any
	var se *json.SyntaxError
	if err := json.Unmarshal(src, &v); errors.As(err, &se) {
		line, col := position(src, int(se.Offset))
		p.errorf(&yaml.Node{Line: line, Column: col}, "", "invalid JSON: %s", se.Error())
		return false
	}
	return true
}

// position returns the 1-based line and column of a byte offset; the
// column counts bytes, as the YAML parser does for ASCII text.
func position(src []byte, off int) (line, col int) {
	off = min(max(off-1, 0), len(src)) // Offset is just past the bad byte
	before := src[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	return line, off - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

// load parses the YAML text into its root node, reporting syntax errors.
func (p *parser) load(src []byte) *yaml.Node {
	if len(bytes.TrimSpace(src)) == 0 {
		p.errorf(nil, "", "definition is empty")
		return nil
	}
	var doc yaml.Node
	err := yaml.Load(src, &doc)
	var le *yaml.LoadError
	switch {
	case errors.As(err, &le):
		p.errorf(&yaml.Node{Line: le.Mark.Line, Column: le.Mark.Column}, "", "%s", yamlMessage(le))
		return nil
	case err != nil:
		p.errorf(nil, "", "%v", err)
		return nil
	case doc.Kind != yaml.DocumentNode || len(doc.Content) == 0:
		p.errorf(nil, "", "definition is empty")
		return nil
	}
	return doc.Content[0]
}

func yamlMessage(le *yaml.LoadError) string {
	msg := strings.TrimPrefix(le.Message, "yaml: ")
	if le.ContextMsg != "" {
		return msg + " (" + le.ContextMsg + ")"
	}
	return msg
}

// workflow decodes the top-level mapping and every state.
func (p *parser) workflow(d *Definition, root *yaml.Node) {
	seen := map[string]bool{}
	for _, f := range p.fields(root, "", "workflow definition") {
		seen[f.key] = true
		switch f.key {
		case "name":
			d.Name, _ = p.str(f)
		case "version":
			d.Version, _ = p.str(f)
		case "startAt":
			d.StartAt, _ = p.str(f)
		case "states":
			p.states(d, f.val)
		case "timeout":
			d.Timeout, _ = p.seconds(f, false)
		default:
			p.errorf(f.keyNode, "", "unknown field %q (fields: name, version, startAt, states, timeout)", f.key)
		}
	}
	if p.deref(root).Kind != yaml.MappingNode {
		return
	}
	for _, key := range []string{"name", "version", "startAt", "states"} {
		if !seen[key] {
			p.errorf(root, "", "missing required field %q", key)
		}
	}
}

// states decodes the states mapping.
func (p *parser) states(d *Definition, n *yaml.Node) {
	fields := p.fields(n, "", "states")
	if fields == nil && p.deref(n).Kind == yaml.MappingNode {
		p.errorf(p.deref(n), "", "states is empty")
	}
	for _, f := range fields {
		if f.key == "" {
			p.errorf(f.keyNode, "", "a state name must not be empty")
			continue
		}
		st := p.state(f.key, f.keyNode, f.val)
		d.states[f.key] = st
		d.order = append(d.order, f.key)
	}
}

// sortErrors orders problems by position, keeping the order of problems
// reported at the same place.
func sortErrors(es ValidationErrors) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Col < es[j].Col
	})
}
