package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// TestHistoryInterleavesActions: a tenant's history holds the operator
// actions on it (single ones and a fleet job's), each page those of its
// span, and no other tenant's.
func TestHistoryInterleavesActions(t *testing.T) {
	ctx := context.Background()
	b := newBus(t, bus.DefaultTopology())
	h := replay.NewHistory(b.JetStream)
	t.Run("NoAuditStream", func(t *testing.T) {
		publish(t, b, engineEvent("a", 1, substate.StateRunning))
		page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a"})
		if err != nil || len(page.Actions) != 0 || page.Actions == nil {
			t.Fatalf("page %+v %v", page, err)
		}
	})
	if err := bus.DefaultTopology().EnsureAuditStream(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	pub := publishers.NewJetStream(b.JetStream)
	act := func(ev substate.AuditEvent) {
		t.Helper()
		ev.Time = time.Now().UTC()
		if err := pub.PublishAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // stored after what came before
	}
	act(substate.AuditEvent{ID: "a-1", Action: substate.ActionStop, Who: "ops", Reason: "wrong plan", TenantID: "a", Outcome: substate.AuditDone})
	act(substate.AuditEvent{ID: "o-1", Action: substate.ActionStop, Who: "ops", TenantID: "other", Outcome: substate.AuditDone})
	publish(t, b, engineEvent("a", 3, substate.StateFailed))
	time.Sleep(5 * time.Millisecond)
	act(substate.AuditEvent{ID: "job-1.1", Action: substate.ActionRetry, Who: "ops", TenantID: "a", Outcome: substate.AuditDone, Job: "job-1", Member: 1})

	page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Transitions) != 2 || len(page.Actions) != 2 || page.Actions[0].ID != "a-1" || page.Actions[1].Job != "job-1" {
		t.Fatalf("page: %d transitions, actions %+v", len(page.Transitions), page.Actions)
	}
	first, err := h.History(ctx, substate.HistoryQuery{TenantID: "a", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.History(ctx, substate.HistoryQuery{TenantID: "a", Limit: 1, AfterSeq: first.NextAfterSeq})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Actions) != 0 || len(second.Actions) != 2 {
		t.Errorf("pages hold %d and %d actions, want 0 (before the first event's) and 2", len(first.Actions), len(second.Actions))
	}
}

// TestHistoryActionsCut: a span with more operator actions than a page
// keeps holds the oldest of them and says it was cut; one with exactly
// as many does not.
func TestHistoryActionsCut(t *testing.T) {
	ctx := context.Background()
	b := newBus(t, bus.DefaultTopology())
	if err := bus.DefaultTopology().EnsureAuditStream(ctx, b.JetStream); err != nil {
		t.Fatal(err)
	}
	h, pub := replay.NewHistory(b.JetStream), publishers.NewJetStream(b.JetStream)
	start := time.Now().UTC()
	for i := range replay.MaxActionsPerPage + 1 {
		ev := substate.AuditEvent{
			ID: fmt.Sprintf("a-%05d", i), Action: substate.ActionStop, Who: "ops", TenantID: "a",
			Outcome: substate.AuditDone, Time: start.Add(time.Duration(i) * time.Microsecond),
		}
		if err := pub.PublishAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if i == replay.MaxActionsPerPage-1 {
			page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a"})
			if err != nil || len(page.Actions) != replay.MaxActionsPerPage || page.ActionsCut {
				t.Fatalf("exactly a page: %d actions, cut %v, err %v", len(page.Actions), page.ActionsCut, err)
			}
		}
	}
	page, err := h.History(ctx, substate.HistoryQuery{TenantID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	got, last := len(page.Actions), page.Actions[len(page.Actions)-1].ID
	if want := replay.MaxActionsPerPage; got != want || !page.ActionsCut || page.Actions[0].ID != "a-00000" || last != fmt.Sprintf("a-%05d", want-1) {
		t.Fatalf("one more than a page: %d actions (%s…%s), cut %v", got, page.Actions[0].ID, last, page.ActionsCut)
	}
}
