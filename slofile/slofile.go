// Package slofile reads the SLO file (substate run --slo-file): per
// workflow type, the longest a tenant may stay in each non-terminal
// sub-state and the longest a whole run may take, as substate.SLOs. The
// YAML is decoded to nodes, so every problem names its line and column;
// the file is bounded in size, entries and nodes, and a file with any
// problem gives no SLOs at all.
package slofile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/substatehq/substate"
)

// Bounds of an SLO file.
const (
	// MaxSize is the largest file read: about 20,000 entries of a few SLOs.
	MaxSize = 1 << 20
	// MaxWorkflows is how many workflow types a file may name.
	MaxWorkflows = 10_000
	// MaxWorkflowType is the longest workflow type name, as the view
	// keeps it (longer ones are cut there, so could never match).
	MaxWorkflowType = substate.MaxWorkflowTypeBytes
	// nodeBudget bounds the YAML nodes one file may expand to, so that
	// aliases cannot make a small file cost a lot.
	nodeBudget = 200_000
	// maxErrors is how many problems one error lists.
	maxErrors = 20
)

// Error is one problem of an SLO file, at a line and column.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the problem as file:line:col: message.
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors is every problem found in a file, in the order found.
type Errors []*Error

// Error says the first problem, on one line, and how many more there are.
func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", es[0].Error(), len(es)-1)
}

// Unwrap returns the problems so errors.As finds each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Load reads and parses the SLO file at path. A file that cannot be read
// or is larger than MaxSize is an error naming it; its problems are
// Errors. Either way the error is an EINVALID *substate.Error.
func Load(path string) (*substate.SLOs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "read SLO file")
	}
	defer func() { _ = f.Close() }() // read only: closing cannot lose anything
	src, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "read SLO file %s", path)
	}
	return Parse(path, src)
}

// Parse parses an SLO file's text; file names it in errors.
func Parse(file string, src []byte) (*substate.SLOs, error) {
	p := &parser{file: file, budget: nodeBudget}
	entries := p.parse(src)
	if len(p.errs) > 0 {
		return nil, substate.WrapError(substate.EINVALID, p.errs, "SLO file refused")
	}
	slos, err := substate.NewSLOs(entries)
	if err != nil { // every check NewSLOs makes was made with a position
		return nil, substate.WrapError(substate.EINVALID, err, "SLO file %s refused", file)
	}
	return slos, nil
}

// parser collects the problems of one file.
type parser struct {
	file   string
	errs   Errors
	budget int
	broke  bool // the node budget ran out: that is the one problem said
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	if len(p.errs) == maxErrors || p.broke {
		return
	}
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, max(n.Column, 1)
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// parse returns the file's entries by workflow type.
func (p *parser) parse(src []byte) map[string]substate.SLOLimits {
	if len(src) > MaxSize {
		p.errorf(nil, "the file is larger than %d bytes", MaxSize)
		return nil
	}
	root := p.load(src)
	if root == nil {
		return nil
	}
	var workflows *yaml.Node
	for _, f := range p.fields(root, "the file") {
		if f.key.Value != "workflows" {
			p.errorf(f.key, "unknown key %s: an SLO file has one key, workflows", substate.QuotePrefix(f.key.Value, substate.QuoteLimit))
			continue
		}
		workflows = f.val
	}
	if workflows == nil {
		if len(p.errs) == 0 {
			p.errorf(root, "no workflows: the file must have a key workflows with an entry per workflow type (\"*\" for any)")
		}
		return nil
	}
	return p.workflows(workflows)
}

// load decodes src to its document's root node.
func (p *parser) load(src []byte) *yaml.Node {
	if len(bytes.TrimSpace(src)) == 0 {
		p.errorf(nil, "the file is empty")
		return nil
	}
	var doc yaml.Node
	err := yaml.Load(src, &doc)
	var le *yaml.LoadError
	switch {
	case errors.As(err, &le):
		p.errorf(&yaml.Node{Line: le.Mark.Line, Column: le.Mark.Column}, "%s%s", yamlMessage(le), starHint(src, le.Mark.Line))
		return nil
	case err != nil:
		p.errorf(nil, "%v", err)
		return nil
	case doc.Kind != yaml.DocumentNode || len(doc.Content) == 0:
		p.errorf(nil, "the file is empty")
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

// starHint explains the one YAML mistake an SLO file invites: the default
// entry's key, *, unquoted, which YAML reads as an alias.
func starHint(src []byte, line int) string {
	lines := bytes.Split(src, []byte("\n"))
	// YAML also ends a line at a lone \r, so its line can lie past the
	// last \n: the window is clamped to the lines there are.
	end := min(line+1, len(lines))
	for _, l := range lines[min(max(line-2, 0), end):end] {
		if bytes.HasPrefix(bytes.TrimSpace(l), []byte("*")) {
			return `; write the default entry's key quoted, as "*":`
		}
	}
	return ""
}

// field is one key and value of a mapping.
type field struct{ key, val *yaml.Node }

// deref follows aliases and charges the node budget; past it every node
// reads as null and one error says why.
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if p.budget--; p.budget == -1 {
		p.errs = nil
		p.errorf(n, "the file expands to more than %d YAML nodes (aliases count as often as they are used)", nodeBudget)
		p.broke = true
	}
	if n == nil || n.Kind == yaml.AliasNode || p.budget < 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

// fields returns the pairs of a mapping node; duplicate keys, keys that
// are not strings and a node that is not a mapping are problems.
func (p *parser) fields(n *yaml.Node, what string) []field {
	n = p.deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s must be a mapping, not %s", what, kindName(n))
		return nil
	}
	seen := make(map[string]bool, len(n.Content)/2)
	out := make([]field, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content) && !p.broke; i += 2 {
		k := p.deref(n.Content[i])
		switch {
		case k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null":
			p.errorf(k, "the keys of %s must be strings, not %s", what, kindName(k))
		case seen[k.Value]:
			p.errorf(k, "%s is given twice in %s", substate.QuotePrefix(k.Value, substate.QuoteLimit), what)
		default:
			seen[k.Value] = true
			out = append(out, field{key: k, val: n.Content[i+1]})
		}
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
			return "nothing"
		}
		return substate.QuotePrefix(n.Value, substate.QuoteLimit)
	}
	return "an unsupported node"
}

// workflows reads the entries of the workflows mapping.
func (p *parser) workflows(n *yaml.Node) map[string]substate.SLOLimits {
	fs := p.fields(n, "workflows")
	if len(fs) > MaxWorkflows {
		p.errorf(fs[MaxWorkflows].key, "more than %d workflow types", MaxWorkflows)
		return nil
	}
	if len(fs) == 0 && len(p.errs) == 0 {
		p.errorf(p.deref(n), "workflows has no entry: give one per workflow type, or \"*\" for any")
	}
	out := make(map[string]substate.SLOLimits, len(fs))
	for _, f := range fs {
		if p.broke {
			return nil
		}
		name := f.key.Value
		switch {
		case name == "":
			p.errorf(f.key, "a workflow type must not be empty")
			continue
		case len(name) > MaxWorkflowType:
			p.errorf(f.key, "workflow type %s is longer than %d bytes", substate.QuotePrefix(name, substate.QuoteLimit), MaxWorkflowType)
			continue
		}
		if l := p.limits(name, f.val); l != nil {
			out[name] = l
		}
	}
	return out
}

// limits reads one workflow type's SLOs.
func (p *parser) limits(name string, n *yaml.Node) substate.SLOLimits {
	what := fmt.Sprintf("workflow %s", substate.QuotePrefix(name, substate.QuoteLimit))
	d := p.deref(n)
	if (d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null") || (d.Kind == yaml.MappingNode && len(d.Content) == 0) {
		p.errorf(d, "%s has no SLO: give at least one, such as backing-off: 10m", what)
		return nil
	}
	fs := p.fields(n, what)
	out := make(substate.SLOLimits, len(fs))
	for _, f := range fs {
		if p.broke {
			return nil
		}
		slo := substate.SLO(f.key.Value)
		if !slo.Valid() {
			p.errorf(f.key, "%s: %s", what, message(substate.CheckSLO(slo, 0)))
			continue
		}
		if d, ok := p.duration(what, slo, f.val); ok {
			out[slo] = d
		}
	}
	return out
}

// message is the message of a substate error, without its cause.
func message(err error) string {
	if e, ok := errors.AsType[*substate.Error](err); ok {
		return e.Message
	}
	return err.Error()
}

// duration reads an SLO's value: a Go duration (90s, 10m, 2h30m; 0 for
// none) in the bounds substate.CheckSLO holds.
func (p *parser) duration(what string, slo substate.SLO, n *yaml.Node) (time.Duration, bool) {
	v := p.deref(n)
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.errorf(v, "%s: %s must be a duration such as 10m or 2h, not %s", what, slo, kindName(v))
		return 0, false
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		hint := ""
		if strings.HasSuffix(v.Value, "d") {
			hint = " (days are written in hours: 24h)"
		}
		p.errorf(v, "%s: %s: %s is not a duration such as 10m or 2h%s", what, slo, kindName(v), hint)
		return 0, false
	}
	if err := substate.CheckSLO(slo, d); err != nil {
		p.errorf(v, "%s: %s", what, message(err))
		return 0, false
	}
	return d, true
}
