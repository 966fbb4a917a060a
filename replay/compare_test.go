package replay_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

func TestCompare(t *testing.T) {
	v := func(id string, retries int) substate.TenantView {
		return substate.TenantView{TenantID: id, WorkflowSubState: substate.StateRunning, WorkflowRetryCount: retries, UpdatedAt: time.Now()}
	}
	t.Run("Equal", func(t *testing.T) {
		a, b := v("a", 1), v("a", 1)
		b.UpdatedAt = b.UpdatedAt.Add(time.Hour) // the one field not compared
		if d := replay.Compare([]substate.TenantView{a}, []substate.TenantView{b}); len(d) != 0 {
			t.Fatalf("diffs %+v", d)
		}
	})
	t.Run("Differ", func(t *testing.T) {
		d := replay.Compare([]substate.TenantView{v("b", 1), v("a", 2)}, []substate.TenantView{v("c", 0), v("a", 3)})
		if len(d) != 3 {
			t.Fatalf("diffs %+v", d)
		}
		want := replay.FieldDiff{Field: "workflowRetryCount", Live: "2", Replay: "3"}
		if d[0].TenantID != "a" || len(d[0].Fields) != 1 || d[0].Fields[0] != want {
			t.Errorf("a: %+v", d[0])
		}
		if d[1].TenantID != "b" || d[1].Only != "live" || d[2].TenantID != "c" || d[2].Only != "replay" {
			t.Errorf("b, c: %+v %+v", d[1], d[2])
		}
	})
}

// TestCompareEveryField: a change of any field of a view but updatedAt
// (the live projector's wall clock) and the deadline fields (the SLO file
// and the clock) is a difference, named by its JSON name.
func TestCompareEveryField(t *testing.T) {
	typ := reflect.TypeFor[substate.TenantView]()
	notCompared := map[string]bool{"updatedAt": true, "tenantId": true, "deadline": true, "deadlineSlo": true, "stuck": true, "stuckSince": true}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		a := substate.TenantView{TenantID: "a"}
		b := a
		fv := reflect.ValueOf(&b).Elem().Field(i)
		switch fv.Kind() {
		case reflect.String:
			fv.SetString("x")
		case reflect.Int:
			fv.SetInt(1)
		case reflect.Bool:
			fv.SetBool(true)
		default:
			fv.Set(reflect.ValueOf(time.Unix(100, 0).UTC()))
		}
		d := replay.Compare([]substate.TenantView{a}, []substate.TenantView{b})
		switch {
		case name == "tenantId":
		case notCompared[name] && len(d) != 0:
			t.Errorf("%s: diffs %+v; it depends on no stream and is not compared", name, d)
		case !notCompared[name] && (len(d) != 1 || len(d[0].Fields) != 1 || d[0].Fields[0].Field != name):
			t.Errorf("%s: diffs %+v", name, d)
		}
	}
}
