package restate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// TestRestateRealServerKeyless follows invocations of a keyless service
// (Notify, no target_service_key) on a real Restate server with the
// admin-API poller, through rows that change several times (scheduled,
// suspended, completed): without a rule that places it, an invocation
// gets one dead letter however many of its rows are published; the
// input the poller reads from its journal, or the idempotency key its
// caller sent, places it with a rule, and the view shows it.
func TestRestateRealServerKeyless(t *testing.T) {
	r := newRealRestateRules(t, "input:$.tenantId", "restate:key", "name:^(?P<tenant>k-[a-z]+)--")
	rs := r.rs
	completed := func(s rowState) bool { return s.Status == "completed" }

	t.Run("NoRuleOneDeadLetter", func(t *testing.T) {
		id := rs.Send(t, "Notify", "", "nap", map[string]any{"order": 17, "ms": 1500}, time.Second)
		seen := r.sweepUntil(t, id, completed)
		for range 3 {
			r.sweep(t)
		}
		if rows := rowsPublished(t, r.Pipeline, id); rows < 3 {
			t.Fatalf("statuses %v: %d rows of the invocation published, want one per change (3 or more)", seen, rows)
		}
		if got := deadLetters(t, r.Pipeline, id); got != 1 {
			t.Fatalf("statuses %v, %d rows: %d dead letters naming the invocation, want 1", seen, rowsPublished(t, r.Pipeline, id), got)
		}
		if !dlqHas(t, r.Pipeline, id, "later events are kept in SUBSTATE_RAW") {
			t.Error("the dead letter does not say that later rows are not dead-lettered")
		}
	})
	t.Run("InputRule", func(t *testing.T) {
		id := rs.Send(t, "Notify", "", "nap", map[string]any{"tenantId": "k-acme", "ms": 1500}, time.Second)
		seen := r.follow(t, id, "k-acme", completed)
		if len(seen) < 3 {
			t.Errorf("statuses %v: want the row to change at least twice", seen)
		}
		v := r.Tenant(t, "k-acme")
		if v.WorkflowSubState != substate.StateSucceeded || v.Provider != substate.ProviderRestate || v.WorkflowType != "Notify" {
			t.Fatalf("view %+v", v)
		}
		if got := deadLetters(t, r.Pipeline, id); got != 0 {
			t.Fatalf("%d dead letters naming the invocation", got)
		}
	})
	t.Run("IdempotencyKeyRule", func(t *testing.T) {
		id := rs.SendIdempotent(t, "Notify", "nap", "k-beta--order-17", map[string]any{"ms": 1500})
		if row := rs.Row(t, id); row["idempotency_key"] != "k-beta--order-17" || row["target_service_key"] != nil {
			t.Fatalf("row %v: want the caller's idempotency key and no service key", row)
		}
		r.follow(t, id, "k-beta", completed)
		if v := r.Tenant(t, "k-beta"); v.WorkflowSubState != substate.StateSucceeded || v.WorkflowType != "Notify" {
			t.Fatalf("view %+v", v)
		}
		if got := deadLetters(t, r.Pipeline, id); got != 0 {
			t.Fatalf("%d dead letters naming the invocation", got)
		}
	})
}

// sweepUntil sweeps until done accepts the invocation's row, and returns
// the statuses its row had at the sweeps, in order.
func (r *realRestate) sweepUntil(t *testing.T, id string, done func(rowState) bool) []string {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s := rowStateOf(r.rs.Row(t, id))
		r.sweep(t)
		if len(seen) == 0 || seen[len(seen)-1] != s.Status {
			seen = append(seen, s.Status)
		}
		if done(s) {
			return seen
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("invocation %s: not done within 60 s; statuses seen %v", id, seen)
	return nil
}

// rowsPublished returns how many messages of SUBSTATE_RAW hold a row of the
// invocation.
func rowsPublished(t *testing.T, p *pipelinetest.Pipeline, id string) int {
	t.Helper()
	n := 0
	for _, m := range bustest.Msgs(t, p.Bus.JetStream, substate.StreamRaw) {
		if strings.Contains(string(m.Data), id) {
			n++
		}
	}
	return n
}

// deadLetters returns how many dead letters name the invocation.
func deadLetters(t *testing.T, p *pipelinetest.Pipeline, id string) int {
	t.Helper()
	n := 0
	for _, m := range bustest.Msgs(t, p.Bus.JetStream, substate.StreamDLQ) {
		if strings.Contains(string(m.Data), id) || strings.Contains(m.Header.Get(substate.HeaderDLQReason), id) {
			n++
		}
	}
	return n
}
