package replay_test

import (
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
