package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// Every change is one line: a tenant whose deadline passed is its warn
// line, the change that moves it on its view changed line with unstuck.
func TestLogChangeOneLine(t *testing.T) {
	since := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	backingOff := substate.TenantView{WorkflowSubState: substate.StateBackingOff, WorkflowExecutionID: "x", WorkflowRetryCount: 2, WorkflowErrorMessage: "503"}
	stuck := backingOff
	stuck.Stuck, stuck.StuckSince, stuck.DeadlineSLO = true, since, substate.SLOBackingOff
	running := substate.TenantView{WorkflowSubState: substate.StateRunning, WorkflowExecutionID: "x", WorkflowRetryCount: 2}
	for _, tt := range []struct {
		name   string
		c      substate.Change
		want   map[string]any
		absent []string
	}{
		{"Stuck", substate.Change{TenantID: "a", Old: backingOff, New: stuck, Kind: substate.ChangeStuck},
			map[string]any{"level": "WARN", "msg": "tenant stuck: its deadline passed with no change", "subState": "backing-off", "slo": "backing-off", "execution": "x"},
			[]string{"old", "unstuck"}},
		{"Unstuck", substate.Change{TenantID: "a", Old: stuck, New: running},
			map[string]any{"level": "INFO", "msg": "view changed", "old": "backing-off", "new": "running", "unstuck": true},
			[]string{"error", "retries"}},
		{"Plain", substate.Change{TenantID: "a", Old: running, New: backingOff},
			map[string]any{"level": "WARN", "msg": "view changed", "error": "503"},
			[]string{"unstuck", "retries"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			state.LogChange(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), &tt.c)
			if n := strings.Count(buf.String(), "\n"); n != 1 {
				t.Fatalf("%d lines, want 1:\n%s", n, buf.String())
			}
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v (%v)", k, rec[k], v, rec)
				}
			}
			for _, k := range tt.absent {
				if _, ok := rec[k]; ok {
					t.Errorf("%s is there: %v", k, rec)
				}
			}
		})
	}
}
