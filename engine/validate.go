package engine

import (
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// validate checks the rules that span states: startAt and every reference
// name an existing state, a terminal state is reachable, and every loop has
// a way out.
func (p *parser) validate(d *Definition, root *yaml.Node) {
	if d.StartAt != "" && d.states[d.StartAt] == nil {
		p.errorf(p.valueNode(root, "startAt"), "", "startAt names state %q, which does not exist", d.StartAt)
	}
	for _, name := range d.order {
		for _, r := range d.states[name].successors() {
			if r.name != "" && d.states[r.name] == nil {
				p.errorf(&yaml.Node{Line: r.line, Column: r.col}, name, "next state %q does not exist", r.name)
			}
		}
	}
	if d.states[d.StartAt] != nil && !terminalReachable(d) {
		p.errorf(p.valueNode(root, "startAt"), "", "no Success or Fail state is reachable from %q", d.StartAt)
	}
	for _, loop := range closedLoops(d) {
		st := d.states[loop[0]]
		p.errorf(&yaml.Node{Line: st.pos.line, Column: st.pos.col}, loop[0],
			"states %s form a loop that can never be left: no next, catch, choice or default of theirs leads out of it", quoteJoin(loop))
	}
}

// valueNode returns the value node of a top-level key, or root.
func (p *parser) valueNode(root *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return p.deref(root.Content[i+1])
		}
	}
	return root
}

// terminalReachable reports whether a Success or Fail state can be reached
// from startAt.
func terminalReachable(d *Definition) bool {
	seen := map[string]bool{d.StartAt: true}
	queue := []string{d.StartAt}
	for len(queue) > 0 {
		st := d.states[queue[0]]
		queue = queue[1:]
		if st.terminal() {
			return true
		}
		for _, r := range st.successors() {
			if d.states[r.name] != nil && !seen[r.name] {
				seen[r.name] = true
				queue = append(queue, r.name)
			}
		}
	}
	return false
}

// closedLoops returns the loops that can never be left, each as its states
// in source order. A loop is a strongly connected group of states (two or
// more, or one that moves to itself); it can be left when one of its
// states has a transition — next, a catch entry, a choice rule or default —
// to a state outside it. Every transition counts, since each can be taken:
// a Task's next when it succeeds, its catch entries when it fails, any
// choice rule. A loop with no way out is the only way a state can have no
// path to a Success or Fail state, so rejecting these ensures every state
// can still end the execution.
func closedLoops(d *Definition) [][]string {
	t := tarjan{d: d, index: map[string]int{}, low: map[string]int{}, on: map[string]bool{}}
	for _, name := range d.order {
		if _, done := t.index[name]; !done {
			t.visit(name)
		}
	}
	rank := map[string]int{}
	for i, name := range d.order {
		rank[name] = i
	}
	var closed [][]string
	for _, c := range t.loops {
		if !leavable(d, c) {
			sortByRank(c, rank)
			closed = append(closed, c)
		}
	}
	sortLoops(closed, rank)
	return closed
}

// leavable reports whether a transition of one of the loop's states leads
// out of it. A reference to a missing state counts as a way out: it is
// reported on its own.
func leavable(d *Definition, loop []string) bool {
	in := make(map[string]bool, len(loop))
	for _, name := range loop {
		in[name] = true
	}
	for _, name := range loop {
		for _, r := range d.states[name].successors() {
			if !in[r.name] {
				return true
			}
		}
	}
	return false
}

// tarjan finds the strongly connected groups of states that form loops.
type tarjan struct {
	d     *Definition
	next  int
	index map[string]int
	low   map[string]int
	on    map[string]bool
	stack []string
	loops [][]string
}

func (t *tarjan) edges(name string) []string {
	var out []string
	for _, r := range t.d.states[name].successors() {
		if t.d.states[r.name] != nil {
			out = append(out, r.name)
		}
	}
	return out
}

func (t *tarjan) visit(v string) {
	t.index[v], t.low[v] = t.next, t.next
	t.next++
	t.stack = append(t.stack, v)
	t.on[v] = true
	selfLoop := false
	for _, w := range t.edges(v) {
		selfLoop = selfLoop || w == v
		if _, seen := t.index[w]; !seen {
			t.visit(w)
			t.low[v] = min(t.low[v], t.low[w])
		} else if t.on[w] {
			t.low[v] = min(t.low[v], t.index[w])
		}
	}
	if t.low[v] != t.index[v] {
		return
	}
	var comp []string
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.on[w] = false
		comp = append(comp, w)
		if w == v {
			break
		}
	}
	if len(comp) > 1 || selfLoop {
		t.loops = append(t.loops, comp)
	}
}

func sortByRank(names []string, rank map[string]int) {
	sort.Slice(names, func(i, j int) bool { return rank[names[i]] < rank[names[j]] })
}

func sortLoops(cs [][]string, rank map[string]int) {
	sort.Slice(cs, func(i, j int) bool { return rank[cs[i][0]] < rank[cs[j][0]] })
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}
