package worker

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/substatehq/substate"
)

// TestOperatorHints: every provider but the built-in engine has a hint of
// what configures its operator, and each flag a hint names is a flag of
// "substate run".
func TestOperatorHints(t *testing.T) {
	names := map[string]bool{}
	var collect func(reflect.Type)
	collect = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				collect(f.Type)
				continue
			}
			if name := f.Tag.Get("name"); name != "" {
				names[name] = true
			}
		}
	}
	collect(reflect.TypeFor[Flags]())
	for _, p := range []substate.Provider{substate.ProviderStepFunctions, substate.ProviderRestate} {
		hint := operatorHints[p]
		if hint == "" {
			t.Errorf("%s: no hint", p)
		}
		for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(hint, -1) {
			if !names[m[1]] {
				t.Errorf("%s: the hint %q names --%s, which is no flag", p, hint, m[1])
			}
		}
	}
}
