package engine

import (
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"
)

// stateFields lists the fields each state type accepts.
var stateFields = map[string][]string{
	typeTask:    {"type", "resource", "next", "parameters", "retry", "timeout", "catch"},
	typeChoice:  {"type", "choices", "default"},
	typeWait:    {"type", "seconds", "timestamp", "next"},
	typeSuccess: {"type"},
	typeFail:    {"type", "error", "cause"},
}

var stateTypes = []string{typeTask, typeChoice, typeWait, typeSuccess, typeFail}

// state decodes one state; name and keyNode are its key in states.
func (p *parser) state(name string, keyNode, n *yaml.Node) *state {
	st := &state{name: name, pos: posOf(keyNode)}
	fields := p.fields(n, name, "a state")
	if fields == nil {
		return st
	}
	st.typ = p.stateType(fields, name, p.deref(n))
	if st.typ == "" {
		return st
	}
	for _, f := range fields {
		if f.key != "type" && p.allowed(st, f) {
			p.stateField(st, f)
		}
	}
	p.required(st, fields)
	return st
}

// stateType finds and checks the type field.
func (p *parser) stateType(fields []field, name string, n *yaml.Node) string {
	for _, f := range fields {
		if f.key != "type" {
			continue
		}
		t, ok := p.str(f)
		if !ok {
			return ""
		}
		if _, known := stateFields[t]; !known {
			p.errorf(p.deref(f.val), name, "unknown state type %q (types: %s)", t, strings.Join(stateTypes, ", "))
			return ""
		}
		return t
	}
	p.errorf(n, name, "missing required field \"type\" (types: %s)", strings.Join(stateTypes, ", "))
	return ""
}

// allowed reports whether st's type accepts field f, reporting it when not.
func (p *parser) allowed(st *state, f field) bool {
	for _, k := range stateFields[st.typ] {
		if k == f.key {
			return true
		}
	}
	switch {
	case f.key == "next" && st.terminal():
		p.errorf(f.keyNode, st.name, "a %s state is terminal and cannot have next", st.typ)
	case knownField(f.key):
		p.errorf(f.keyNode, st.name, "field %q is not allowed in a %s state (fields: %s)", f.key, st.typ, strings.Join(stateFields[st.typ], ", "))
	default:
		p.errorf(f.keyNode, st.name, "unknown field %q (fields of a %s state: %s)", f.key, st.typ, strings.Join(stateFields[st.typ], ", "))
	}
	return false
}

func knownField(key string) bool {
	for _, fields := range stateFields {
		for _, k := range fields {
			if k == key {
				return true
			}
		}
	}
	return false
}

// stateField decodes one field the state's type accepts.
func (p *parser) stateField(st *state, f field) {
	switch f.key {
	case "next":
		st.next = p.ref(f)
	case "default":
		st.dflt = p.ref(f)
	case "resource":
		p.resource(st, f)
	case "parameters":
		st.params = p.template(f.val, st.name, 0)
	case "retry":
		st.retry = p.retry(f.val, st.name)
	case "timeout":
		st.timeout, _ = p.seconds(f, false)
	case "catch":
		st.catch = p.catchers(f)
	case "choices":
		st.choices = p.choices(f)
	case "seconds":
		st.seconds, _ = p.seconds(f, true)
		st.hasSecs = true
	case "timestamp":
		p.timestamp(st, f)
	case "error":
		st.errType, _ = p.str(f)
	case "cause":
		st.cause, _ = p.str(f)
	}
}

// resource splits "service.operation" at its last dot.
func (p *parser) resource(st *state, f field) {
	s, ok := p.str(f)
	if !ok {
		return
	}
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		p.errorf(p.deref(f.val), st.name, "resource %q must be \"service.operation\"", s)
		return
	}
	st.service, st.operation = s[:i], s[i+1:]
}

func (p *parser) timestamp(st *state, f field) {
	s, ok := p.str(f)
	if !ok {
		return
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.errorf(p.deref(f.val), st.name, "timestamp %q must be RFC 3339, like 2024-12-31T23:59:59Z", s)
		return
	}
	st.timestamp = t
}

// catchers decodes a catch list.
func (p *parser) catchers(f field) []catcher {
	var out []catcher
	for _, item := range p.list(f) {
		var c catcher
		for _, cf := range p.fields(item, f.stateCtx, "a catch entry") {
			switch cf.key {
			case "errorType":
				c.errorType, _ = p.str(cf)
			case "next":
				c.next = p.ref(cf)
			default:
				p.errorf(cf.keyNode, f.stateCtx, "unknown field %q in catch (errorType, next)", cf.key)
			}
		}
		p.requireKeys(item, f.stateCtx, "catch entry", "errorType", "next")
		out = append(out, c)
	}
	return out
}

// choices decodes a Choice state's rules.
func (p *parser) choices(f field) []choice {
	var out []choice
	for _, item := range p.list(f) {
		var c choice
		for _, cf := range p.fields(item, f.stateCtx, "a choice") {
			switch cf.key {
			case "condition":
				c.cond = p.condition(cf.val, f.stateCtx)
			case "next":
				c.next = p.ref(cf)
			default:
				p.errorf(cf.keyNode, f.stateCtx, "unknown field %q in choice (condition, next)", cf.key)
			}
		}
		p.requireKeys(item, f.stateCtx, "choice", "condition", "next")
		out = append(out, c)
	}
	return out
}

// list returns the items of a non-empty sequence field.
func (p *parser) list(f field) []*yaml.Node {
	v := p.deref(f.val)
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.errorf(v, f.stateCtx, "%s must be a non-empty list, not %s", f.key, kindName(v))
		return nil
	}
	return v.Content
}

// requireKeys reports each key a mapping lacks.
func (p *parser) requireKeys(n *yaml.Node, st, what string, keys ...string) {
	if p.deref(n).Kind != yaml.MappingNode {
		return
	}
	for _, k := range keys {
		if !p.hasKey(n, k) {
			p.errorf(p.deref(n), st, "%s has no %s", what, k)
		}
	}
}

// required reports the fields a state's type needs but lacks.
func (p *parser) required(st *state, fields []field) {
	has := map[string]bool{}
	for _, f := range fields {
		has[f.key] = true
	}
	need := map[string][]string{
		typeTask:   {"resource", "next"},
		typeChoice: {"choices"},
		typeWait:   {"next"},
	}[st.typ]
	for _, k := range need {
		if !has[k] {
			p.errorf(&yaml.Node{Line: st.pos.line, Column: st.pos.col}, st.name, "a %s state needs %s", st.typ, k)
		}
	}
	if st.typ == typeWait && has["seconds"] == has["timestamp"] {
		p.errorf(&yaml.Node{Line: st.pos.line, Column: st.pos.col}, st.name, "a Wait state needs exactly one of seconds and timestamp")
	}
}
