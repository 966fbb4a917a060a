package mapping

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/substatehq/substate"
	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// The kinds of tenant rule, as written before the colon of a rule string.
const (
	RuleInput   = "input"   // input:<JSONPath> on the execution input
	RuleName    = "name"    // name:<regexp> with a named group "tenant"
	RuleRestate = "restate" // restate:key, the Restate target_service_key
	RuleEngine  = "engine"  // engine:tenant (or just "engine"), the engine event's tenantId
)

// TenantRule is one way of finding the tenant of an execution. Parse one
// with ParseTenantRule; the zero value resolves nothing.
type TenantRule struct {
	kind  string
	text  string         // the rule as written
	path  *jsonpath.Path // input rules
	names []string       // input rules whose path is only member names
	re    *regexp.Regexp // name rules
	group int            // index of the "tenant" group in re
}

// TenantRules are tenant rules tried in order; the first that resolves wins.
type TenantRules []TenantRule

// DefaultTenantRules returns the rules used when none are configured:
// input:$.tenantId, restate:key, engine:tenant.
func DefaultTenantRules() TenantRules {
	rules, err := ParseTenantRules("input:$.tenantId", "restate:key", "engine:tenant")
	if err != nil {
		panic(err) // the literals above are valid
	}
	return rules
}

// ParseTenantRules parses each rule string with ParseTenantRule.
func ParseTenantRules(specs ...string) (TenantRules, error) {
	rules := make(TenantRules, 0, len(specs))
	for _, s := range specs {
		r, err := ParseTenantRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ParseTenantRule parses a rule string: "input:$.tenantId" (an RFC 9535
// JSONPath on the execution input), "name:^(?P<tenant>[a-z0-9-]+)--" (a
// regexp on the execution name with a named group "tenant"), "restate:key"
// or "engine:tenant". Bad rules are EINVALID errors.
func ParseTenantRule(s string) (TenantRule, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
	r := TenantRule{kind: kind, text: strings.TrimSpace(s)}
	switch kind {
	case RuleInput:
		return r, r.parseInput(arg)
	case RuleName:
		return r, r.parseName(arg)
	case RuleRestate:
		if arg != "key" {
			return TenantRule{}, substate.Errorf(substate.EINVALID, "tenant rule %q: want restate:key", s)
		}
		return r, nil
	case RuleEngine:
		if arg != "" && arg != "tenant" {
			return TenantRule{}, substate.Errorf(substate.EINVALID, "tenant rule %q: want engine:tenant", s)
		}
		r.text = "engine:tenant"
		return r, nil
	}
	return TenantRule{}, substate.Errorf(substate.EINVALID,
		"tenant rule %q: unknown kind %q (want input:, name:, restate:key or engine:tenant)", s, kind)
}

func (r *TenantRule) parseInput(arg string) error {
	p, err := jsonpath.Parse(arg)
	if err != nil {
		return substate.WrapError(substate.EINVALID, err, "tenant rule %q: bad JSONPath", r.text)
	}
	r.path, r.names = p, memberNames(p)
	return nil
}

// memberNames returns the names of a path made only of single member-name
// child segments ($.a.b), which can be looked up without a generic query.
func memberNames(p *jsonpath.Path) []string {
	var names []string
	for _, seg := range p.Query().Segments() {
		sels := seg.Selectors()
		if seg.IsDescendant() || len(sels) != 1 {
			return nil
		}
		n, ok := sels[0].(spec.Name)
		if !ok {
			return nil
		}
		names = append(names, string(n))
	}
	if len(names) == 0 {
		return nil
	}
	return names
}

func (r *TenantRule) parseName(arg string) error {
	re, err := regexp.Compile(arg)
	if err != nil {
		return substate.WrapError(substate.EINVALID, err, "tenant rule %q: bad regexp", r.text)
	}
	r.re, r.group = re, re.SubexpIndex("tenant")
	if r.group < 0 {
		return substate.Errorf(substate.EINVALID, "tenant rule %q: regexp has no group (?P<tenant>…)", r.text)
	}
	return nil
}

// String returns the rule as written.
func (r TenantRule) String() string { return r.text }

// MarshalText implements encoding.TextMarshaler.
func (r TenantRule) MarshalText() ([]byte, error) { return []byte(r.text), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseTenantRule, so
// rules can be flag or config values.
func (r *TenantRule) UnmarshalText(b []byte) error {
	v, err := ParseTenantRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// tenantSource is what an execution offers to the tenant rules.
type tenantSource struct {
	provider     substate.Provider
	execution    string // for the error message
	input        []byte // execution input JSON text; nil when absent or excluded
	name         string // execution name
	serviceKey   string // Restate target_service_key
	engineTenant string // the engine event's tenantId
}

// maxQuoted is how much of an execution id or name an error quotes: all
// of a real one (a Step Functions execution ARN is at most about 300
// bytes), a bounded part of a forged one.
const maxQuoted = 512

// resolve returns the tenant of src by the first rule that finds one. A
// rule that finds an id ValidateTenantID refuses (too long, not UTF-8, a
// control character) ends the search with an EINVALID error: the next rule
// might name another tenant, and filing the event there would be wrong.
// When no rule finds one, the error is a *substate.UnresolvedTenant naming
// the execution, whose ENOTENANT error lists every rule tried and why it
// did not.
func (rs TenantRules) resolve(src *tenantSource) (string, error) {
	for i := range rs {
		t, _, err := rs[i].apply(src)
		if err == nil && t != "" {
			err = substate.ValidateTenantID(t)
		}
		if err != nil {
			return "", substate.WrapError(substate.EINVALID, err, "execution %s: tenant rule %s found an invalid tenant id",
				substate.QuotePrefix(src.execution, maxQuoted), rs[i].text)
		}
		if t != "" {
			return t, nil
		}
	}
	tried := make([]string, 0, len(rs))
	for i := range rs {
		_, why, _ := rs[i].apply(src)
		tried = append(tried, rs[i].text+" ("+why+")")
	}
	return "", &substate.UnresolvedTenant{Provider: src.provider, ExecutionID: src.execution,
		Err: substate.Errorf(substate.ENOTENANT, "no tenant for execution %s: tried %s",
			substate.QuotePrefix(src.execution, maxQuoted), strings.Join(tried, "; "))}
}

// apply returns the tenant the rule finds in src; or "" and why not; or an
// error when what it finds is a string that is not valid UTF-8.
func (r *TenantRule) apply(src *tenantSource) (tenant, why string, err error) {
	switch r.kind {
	case RuleInput:
		if len(src.input) == 0 {
			return "", "no execution input", nil
		}
		return r.fromInput(src.input)
	case RuleName:
		if src.name == "" {
			return "", "no execution name", nil
		}
		m := r.re.FindStringSubmatch(src.name)
		if m == nil || m[r.group] == "" {
			return "", "no match in " + substate.QuotePrefix(src.name, maxQuoted), nil
		}
		return m[r.group], "", nil
	case RuleRestate:
		if src.serviceKey == "" {
			return "", "no target_service_key", nil
		}
		return src.serviceKey, "", nil
	case RuleEngine:
		if src.engineTenant == "" {
			return "", "no engine tenantId", nil
		}
		return src.engineTenant, "", nil
	}
	return "", "empty rule", nil
}

func (r *TenantRule) fromInput(input []byte) (string, string, error) {
	if r.names != nil {
		v, ok := lookupMembers(input, r.names)
		if !ok {
			return "", "no match", nil
		}
		return scalarTenant(v)
	}
	var doc any
	if err := decode(input, &doc); err != nil {
		return "", "input is not JSON", nil
	}
	nodes := r.path.Select(doc)
	if len(nodes) == 0 {
		return "", "no match", nil
	}
	t, why := anyTenant(nodes[0])
	return t, why, nil
}

// scalarTenant returns the tenant held by a raw JSON string or number; a
// string that does not decode strictly is an error.
func scalarTenant(v json.RawMessage) (string, string, error) {
	if len(v) > 0 && v[0] == '"' {
		s, err := decodeString(v)
		if err != nil {
			return "", "", err
		}
		t, why := anyTenant(s)
		return t, why, nil
	}
	var x any
	if err := decode(v, &x); err != nil {
		return "", "input is not JSON", nil
	}
	t, why := anyTenant(x)
	return t, why, nil
}

func anyTenant(v any) (string, string) {
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			return "", "empty value"
		}
		return x, ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), ""
	}
	return "", fmt.Sprintf("value is a %s, not a string", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}
