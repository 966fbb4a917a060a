package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/pipelinetest"
)

// longHistory is a Step Functions history in which tasks of several states
// fail and are retried: events oldest first, and after each event the
// number of failed attempts so far (every failure here is retried).
type longHistory struct {
	events   []json.RawMessage
	failures []int
	at       time.Time
}

func (h *longHistory) add(typ string, details map[string]any) {
	id := len(h.events) + 1
	e := map[string]any{"id": id, "previousEventId": id - 1, "type": typ, "timestamp": float64(h.at.Add(time.Duration(id)*time.Second).UnixMilli()) / 1000}
	for k, v := range details {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	h.events = append(h.events, b)
	n := 0
	if len(h.failures) > 0 {
		n = h.failures[len(h.failures)-1]
	}
	if typ == "TaskFailed" {
		n++
	}
	h.failures = append(h.failures, n)
}

// state adds one Task state whose task fails retries times before it succeeds.
func (h *longHistory) state(name string, retries int) {
	h.add("TaskStateEntered", map[string]any{"stateEnteredEventDetails": map[string]any{"name": name}})
	h.add("TaskScheduled", nil)
	for i := range retries {
		h.add("TaskStarted", nil)
		h.add("TaskFailed", map[string]any{"taskFailedEventDetails": map[string]any{
			"error": "Provisioning.Busy", "cause": fmt.Sprintf(`{"errorMessage":"%s: quota service busy (try %d)"}`, name, i+1)}})
		h.add("TaskScheduled", nil)
	}
	h.add("TaskStarted", nil)
	h.add("TaskSucceeded", nil)
	h.add("TaskStateExited", map[string]any{"stateExitedEventDetails": map[string]any{"name": name}})
}

// TestReconcilerLongHistory reads a 1,500-event history across pages while
// it grows: after every sweep the view's retry count is exactly the
// history's, never lower than before, and a backoff that starts between
// two polls shows at the next one.
func TestReconcilerLongHistory(t *testing.T) {
	ctx := context.Background()
	p := pipelinetest.New(t)
	clock := pipelinetest.NewClock(time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC))
	srv, sfn := newSFN(t, clock)
	sfn.HistoryPageSize = 20
	rng := rand.New(rand.NewPCG(15, 1500))
	h := &longHistory{at: clock.Now().Add(-time.Hour)}
	h.add("ExecutionStarted", nil)
	for i := 0; len(h.events) < 1500; i++ {
		h.state(fmt.Sprintf("Provision%02d", i%7), rng.IntN(4))
	}
	machine := awstest.StateMachineARN("tenant-provisioning")
	arn := awstest.ExecutionARN(machine, "long-1")
	srv.AddExecution(awstest.Execution{ARN: arn, StateMachineARN: machine, Name: "long-1", Status: "RUNNING",
		Input: `{"tenantId":"acme-long"}`, StartDate: h.at})
	setHistory := func(n int) {
		if err := srv.SetHistory(arn, h.events[:n]); err != nil {
			t.Fatal(err)
		}
	}
	r := newReconciler(p.View, sfn, p.Pub, clock)
	r.Every, r.QPS = 15*time.Second, 0

	check := func(t *testing.T, n int, prev int) substate.TenantView {
		t.Helper()
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		p.Settle(t)
		v := p.Tenant(t, "acme-long")
		if want := h.failures[n-1]; v.WorkflowRetryCount != want {
			t.Fatalf("after %d events: retries %d, want %d", n, v.WorkflowRetryCount, want)
		}
		if v.WorkflowRetryCount < prev {
			t.Fatalf("after %d events: retries went down from %d to %d", n, prev, v.WorkflowRetryCount)
		}
		clock.Advance(r.Every)
		return v
	}
	// The first poll reads 1,000 events: one page of 1000. (The execution
	// is not in the view yet, so it is published here; the reconciler
	// polls it from then on.)
	setHistory(1000)
	raw, err := sfn.Poll(ctx, arn, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Calls("GetExecutionHistory"); got != 1 {
		t.Fatalf("first read: %d history calls, want 1 page of 1000", got)
	}
	p.Publish(t, raw)
	p.Settle(t)
	v := p.Tenant(t, "acme-long")
	if v.WorkflowRetryCount != h.failures[999] {
		t.Fatalf("after the first read: retries %d, want %d", v.WorkflowRetryCount, h.failures[999])
	}
	// The history grows between polls, past 1,500 events; each poll reads
	// only what is new, in pages of 20.
	for n := 1000; n < len(h.events); {
		n = min(n+1+rng.IntN(45), len(h.events))
		setHistory(n)
		srv.ResetCalls()
		v = check(t, n, v.WorkflowRetryCount)
		if got, most := srv.Calls("GetExecutionHistory"), 1+45/20+1; got > most {
			t.Fatalf("read %d pages for at most 46 new events", got)
		}
	}
	if v.WorkflowRetryCount < 100 {
		t.Fatalf("the history holds only %d failures", v.WorkflowRetryCount)
	}
	// A task fails between two polls: the next poll shows the backoff.
	before := v.WorkflowRetryCount
	h.add("TaskStateEntered", map[string]any{"stateEnteredEventDetails": map[string]any{"name": "Final"}})
	h.add("TaskScheduled", nil)
	h.add("TaskStarted", nil)
	h.add("TaskFailed", map[string]any{"taskFailedEventDetails": map[string]any{"error": "Provisioning.Busy", "cause": `{"errorMessage":"Final: quota service busy"}`}})
	setHistory(len(h.events))
	v = check(t, len(h.events), before)
	if v.WorkflowSubState != substate.StateBackingOff || v.WorkflowRetryCount != before+1 || v.WorkflowErrorMessage != "Final: quota service busy" {
		t.Fatalf("after a failure between polls: %s, retries %d, error %q; want backing-off, %d, the message", v.WorkflowSubState, v.WorkflowRetryCount, v.WorkflowErrorMessage, before+1)
	}
	// The retry starts: running, the count stays.
	h.add("TaskScheduled", nil)
	h.add("TaskStarted", nil)
	setHistory(len(h.events))
	v = check(t, len(h.events), v.WorkflowRetryCount)
	if v.WorkflowSubState != substate.StateRunning || v.WorkflowRetryCount != before+1 || len(h.events) < 1500 {
		t.Fatalf("the retry running: %s, retries %d after %d events", v.WorkflowSubState, v.WorkflowRetryCount, len(h.events))
	}
}
