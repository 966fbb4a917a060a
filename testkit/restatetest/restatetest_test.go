package restatetest_test

import (
	"testing"

	"github.com/substatehq/substate/testkit/restatetest"
)

func TestStart(t *testing.T) {
	s := restatetest.Start(t)
	id := s.Send(t, "Provision", "k1", "ok", nil, 0)
	row := s.WaitRow(t, id, "completed", func(r map[string]any) bool { return r["status"] == "completed" })
	if row["completion_result"] != "success" || row["target_service_key"] != "k1" {
		t.Fatalf("row = %v", row)
	}
}
