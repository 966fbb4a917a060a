// Package redact hides what workflow executions carry that nobody but an
// administrator should read: the providers' execution input and output,
// inside the raw payloads substate keeps as evidence (EventBridge events,
// Step Functions polls, Restate rows, engine events). The stored evidence
// stays as received; redaction is applied to every copy that leaves the
// process.
//
// A Policy keeps only the fields its allow-list of JSONPaths (RFC 9535)
// selects, replaces every other value with "[redacted]", and redacts values
// whose member name looks like a secret (password, token, key…) even inside
// an allowed subtree. Paths given as always kept (the tenant rule's fields)
// are shown exactly as they are.
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"

	"github.com/substatehq/substate/internal/jsonx"
)

// Redacted replaces every value a policy hides.
const Redacted = "[redacted]"

// Policy says what of a provider's input and output may be shown. The zero
// Policy shows nothing. It is safe for concurrent use.
type Policy struct {
	allow  []*jsonpath.Path
	always []*jsonpath.Path
}

// New returns the policy that shows the subtrees the allow paths select,
// secret-looking members inside them excepted, and the nodes the always
// paths select, as they are.
func New(allow, always []string) (*Policy, error) {
	p := &Policy{}
	for _, list := range []struct {
		paths []string
		into  *[]*jsonpath.Path
	}{{allow, &p.allow}, {always, &p.always}} {
		for _, s := range list.paths {
			path, err := jsonpath.Parse(s)
			if err != nil {
				return nil, fmt.Errorf("redaction path %q: %w", s, err)
			}
			*list.into = append(*list.into, path)
		}
	}
	return p, nil
}

// Value returns a redacted copy of a decoded JSON document (as
// encoding/json decodes into any).
func (p *Policy) Value(doc any) any {
	if p == nil {
		p = &Policy{}
	}
	root := &node{}
	for _, path := range p.allow {
		for np := range path.SelectLocated(doc).Paths() {
			root.insert(np).allow = true
		}
	}
	for _, path := range p.always {
		for np := range path.SelectLocated(doc).Paths() {
			root.insert(np).always = true
		}
	}
	return walk(doc, root, false)
}

// JSONText redacts a document given as JSON text, as EventBridge and Step
// Functions carry input and output. Text that is not JSON, and a document
// of which nothing is shown, become [redacted].
func (p *Policy) JSONText(s string) string {
	doc, err := jsonx.Decode([]byte(s))
	if err != nil {
		return Redacted
	}
	v := p.Value(doc)
	if v == Redacted {
		return Redacted // not the JSON text "\"[redacted]\"", which reads worse
	}
	return string(encode(v))
}

// walk copies v, keeping what n allows.
func walk(v any, n *node, allowed bool) any {
	if n != nil && n.always {
		return v
	}
	allowed = allowed || n != nil && n.allow
	if !allowed && !n.leads() {
		return Redacted
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, child := range v {
			cn := n.name(k)
			if SecretName(k) && !cn.keepsSomething() {
				out[k] = Redacted
				continue
			}
			out[k] = walk(child, cn, allowed && !SecretName(k))
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, child := range v {
			out[i] = walk(child, n.index(i), allowed)
		}
		return out
	}
	if allowed {
		return v
	}
	return Redacted
}

// node is one step of the normalized paths a document's allow and always
// paths selected.
type node struct {
	names   map[string]*node
	indexes map[int]*node
	allow   bool // the subtree is shown (secret-looking members excepted)
	always  bool // the node is shown as it is
}

func (n *node) insert(np spec.NormalizedPath) *node {
	for _, sel := range np {
		switch s := sel.(type) {
		case spec.Name:
			if n.names == nil {
				n.names = map[string]*node{}
			}
			n = child(n.names, string(s))
		case spec.Index:
			if n.indexes == nil {
				n.indexes = map[int]*node{}
			}
			n = child(n.indexes, int(s))
		}
	}
	return n
}

func child[K comparable](m map[K]*node, k K) *node {
	c, ok := m[k]
	if !ok {
		c = &node{}
		m[k] = c
	}
	return c
}

func (n *node) name(k string) *node {
	if n == nil {
		return nil
	}
	return n.names[k]
}

func (n *node) index(i int) *node {
	if n == nil {
		return nil
	}
	return n.indexes[i]
}

// leads reports whether something below n is shown.
func (n *node) leads() bool { return n != nil && (len(n.names) > 0 || len(n.indexes) > 0) }

// keepsSomething reports whether n or a node below it is always shown.
func (n *node) keepsSomething() bool {
	if n == nil {
		return false
	}
	if n.always {
		return true
	}
	for _, c := range n.names {
		if c.keepsSomething() {
			return true
		}
	}
	for _, c := range n.indexes {
		if c.keepsSomething() {
			return true
		}
	}
	return false
}

// encode writes a document as compact JSON, without HTML escaping.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// secretWords are member-name words that mark a secret; secretParts mark
// one anywhere in the name.
var (
	secretWords = map[string]bool{"key": true, "keys": true, "pwd": true, "pass": true, "auth": true,
		"pin": true, "cvv": true, "cvc": true, "ssn": true, "otp": true, "session": true, "cookie": true, "cookies": true}
	secretParts = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "apikey",
		"authorization", "privatekey", "signature", "bearer"}
)

// SecretName reports whether a member name looks like it holds a secret:
// it contains password, secret, token, credential, apikey, authorization,
// privatekey, signature or bearer (any case), or one of its words (split at
// case changes, digits, "_", "-", "." and spaces) is key, pwd, pass, auth,
// pin, cvv, cvc, ssn, otp, session or cookie.
func SecretName(name string) bool {
	lower := strings.ToLower(name)
	for _, part := range secretParts {
		if strings.Contains(lower, part) {
			return true
		}
	}
	for _, w := range words(name) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// words splits a member name into lower-case words: "dbPassword" → db,
// password; "x-api-key" → x, api, key; "APIKey" → api, key.
func words(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		isUpper := r >= 'A' && r <= 'Z'
		isLetter := isUpper || r >= 'a' && r <= 'z' || r > 127
		switch {
		case !isLetter:
			flush()
			continue
		case isUpper && i > 0 && len(cur) > 0:
			prevLower := rs[i-1] >= 'a' && rs[i-1] <= 'z'
			nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			prevUpper := rs[i-1] >= 'A' && rs[i-1] <= 'Z'
			if prevLower || prevUpper && nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}
