package contract_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/testkit/contracttest"
)

// TestSchemasAreTheTypes: each object schema of openapi.json that a Go
// type answers has the type's JSON fields as its properties, no more and
// no fewer, and requires only fields the type always writes (no
// omitempty or omitzero), so a field added to a type cannot be missing
// from the contract.
func TestSchemasAreTheTypes(t *testing.T) {
	v, err := contracttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"Accepted":              reflect.TypeFor[ingress.IngestResult](),
		"TenantView":            reflect.TypeFor[substate.TenantView](),
		"TenantPage":            reflect.TypeFor[substate.TenantPage](),
		"Group":                 reflect.TypeFor[substate.Group](),
		"GroupPage":             reflect.TypeFor[substate.GroupPage](),
		"ViewPosition":          reflect.TypeFor[httpapi.ViewPosition](),
		"ViewState":             reflect.TypeFor[substate.ViewState](),
		"Evidence":              reflect.TypeFor[substate.Evidence](),
		"Transition":            reflect.TypeFor[substate.Transition](),
		"HistoryPage":           reflect.TypeFor[substate.HistoryPage](),
		"ExecutionInfo":         reflect.TypeFor[substate.ExecutionInfo](),
		"ExecutionResult":       reflect.TypeFor[substate.ExecutionResult](),
		"ConsoleOverview":       reflect.TypeFor[console.Overview](),
		"ConsoleDeadLetter":     reflect.TypeFor[console.DeadLetter](),
		"ConsoleDeadLetterPage": reflect.TypeFor[console.DeadLetterPage](),
	} {
		t.Run(name, func(t *testing.T) {
			ref := v.Doc.Components.Schemas[name]
			if ref == nil {
				t.Fatalf("openapi.json has no schema %s", name)
			}
			fields := jsonFields(typ)
			var props []string
			for p := range ref.Value.Properties {
				props = append(props, p)
				if _, ok := fields[p]; !ok {
					t.Errorf("%s.%s is not a JSON field of %s", name, p, typ)
				}
			}
			for f := range fields {
				if !slices.Contains(props, f) {
					t.Errorf("%s has no property %s, a JSON field of %s", name, f, typ)
				}
			}
			for _, r := range ref.Value.Required {
				if omitted, ok := fields[r]; ok && omitted {
					t.Errorf("%s requires %s, which %s leaves out when empty", name, r, typ)
				}
			}
		})
	}
}

// jsonFields returns the JSON member names of a struct type, each with
// whether it is left out when empty.
func jsonFields(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for _, f := range reflect.VisibleFields(typ) {
		tag, ok := f.Tag.Lookup("json")
		if !f.IsExported() || tag == "-" || (f.Anonymous && !ok) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	}
	return out
}
