package restate_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/publishers"
)

// TestRestateRealServerWebhook follows invocations of a real Restate
// server through the webhook path alone: a Restate handler (Reporter)
// reads the invocation's sys_invocation row and posts it, signed, to the
// ingress; the view must then show what that row said.
func TestRestateRealServerWebhook(t *testing.T) {
	r := newRealRestate(t)
	rs := r.rs
	secret := fixtures.StandardWebhookVector().Secret
	wv, err := ingress.NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	pub := publishers.NewJetStream(r.Bus.JetStream)
	in := &ingress.Ingress{Store: pub, DeadLetters: pub, Webhook: wv, Ready: r.Bus.Ready, Timeout: 5 * time.Second}
	srv := httptest.NewServer((&httpapi.Server{Ingest: in}).Handler())
	t.Cleanup(srv.Close)

	// report has the Reporter post the invocation's row and returns it.
	report := func(t *testing.T, id string) rowState {
		t.Helper()
		out := rs.Call(t, "Reporter", "report", map[string]string{
			"invocationId": id, "url": srv.URL + "/v1/ingest/restate", "secret": secret, "adminUrl": rs.AdminURL,
		})
		var res struct {
			Status int            `json:"status"`
			Row    map[string]any `json:"row"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.Status != http.StatusAccepted {
			t.Fatalf("reporter: %s (%v), want the ingress to answer 202", out, err)
		}
		r.Settle(t)
		return rowStateOf(res.Row)
	}
	follow := func(t *testing.T, id, tenant string, done func(rowState) bool) {
		t.Helper()
		retries := 0
		prev, _ := r.View.Tenant(context.Background(), tenant)
		if prev.WorkflowExecutionID == id {
			retries = prev.WorkflowRetryCount
		}
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			s := report(t, id)
			v := r.Tenant(t, tenant)
			want := expectOf(s, retries, 0).readyBetweenAttempts(s, prev, id)
			if s.Status == "paused" {
				want = r.pausedExpect(t, id, retries)
			}
			want.check(t, tenant+" row "+s.String(), v)
			retries, prev = v.WorkflowRetryCount, v
			if done(s) {
				return
			}
		}
		t.Fatalf("%s: not done within 60 s", tenant)
	}

	t.Run("FailsThenSucceeds", func(t *testing.T) {
		rs.Gate(t, "w-flaky", "fail")
		id := rs.Send(t, "Provision", "w-flaky", "flaky", nil, 0)
		follow(t, id, "w-flaky", func(s rowState) bool { return s.Status == "backing-off" && s.RetryCount >= 2 })
		rs.Gate(t, "w-flaky", "open")
		follow(t, id, "w-flaky", func(s rowState) bool { return s.Status == "completed" })
		if v := r.Tenant(t, "w-flaky"); v.WorkflowSubState != substate.StateSucceeded {
			t.Fatalf("view %+v", v)
		}
	})
	t.Run("TerminalError", func(t *testing.T) {
		id := rs.Send(t, "Provision", "w-term", "terminal", nil, 0)
		follow(t, id, "w-term", func(s rowState) bool { return s.Status == "completed" })
	})
	t.Run("SleepSuspends", func(t *testing.T) {
		id := rs.Send(t, "Provision", "w-nap", "nap", nil, 0)
		follow(t, id, "w-nap", func(s rowState) bool { return s.Status == "suspended" })
	})
	t.Run("Paused", func(t *testing.T) {
		id := rs.Send(t, "Provision", "w-stuck", "stuck", nil, 0)
		follow(t, id, "w-stuck", func(s rowState) bool { return s.Status == "paused" })
		rs.Gate(t, "w-stuck", "open")
		rs.Resume(t, id)
		follow(t, id, "w-stuck", func(s rowState) bool { return s.Status == "completed" })
	})
	t.Run("PausedWithTheSameErrorEachTime", func(t *testing.T) {
		// One TransientError for three attempts: the count needs the
		// handler's retry policy, which the reporter attaches.
		id := rs.Send(t, "Provision", "w-same", "same", nil, 0)
		follow(t, id, "w-same", func(s rowState) bool { return s.Status == "paused" })
		rs.Gate(t, "w-same", "open")
		rs.Resume(t, id)
		follow(t, id, "w-same", func(s rowState) bool { return s.Status == "completed" })
	})
	for _, end := range []struct {
		name string
		act  func(testing.TB, string)
	}{{"Killed", rs.Kill}, {"Cancelled", rs.Cancel}} {
		t.Run(end.name, func(t *testing.T) {
			tenant := "w-" + end.name
			id := rs.Send(t, "Provision", tenant, "nap", nil, 0)
			follow(t, id, tenant, func(s rowState) bool { return s.Status == "suspended" })
			end.act(t, id)
			follow(t, id, tenant, func(s rowState) bool { return s.Status == "completed" })
			if v := r.Tenant(t, tenant); v.WorkflowSubState != substate.StateFailed || v.WorkflowVerb != substate.VerbCancelled {
				t.Fatalf("view %+v", v)
			}
		})
	}
	t.Run("DelayedSend", func(t *testing.T) {
		id := rs.Send(t, "Provision", "w-later", "ok", nil, 2*time.Second)
		follow(t, id, "w-later", func(s rowState) bool { return s.Status == "scheduled" })
		follow(t, id, "w-later", func(s rowState) bool { return s.Status == "completed" })
	})
	t.Run("KeylessServiceInputNamesTheTenant", func(t *testing.T) {
		id := rs.Send(t, "Notify", "", "send", map[string]string{"tenantId": "w-keyless"}, 0)
		rs.WaitRow(t, id, "completed", func(row map[string]any) bool { return row["status"] == "completed" })
		report(t, id)
		if v := r.Tenant(t, "w-keyless"); v.WorkflowSubState != substate.StateSucceeded || v.WorkflowType != "Notify" {
			t.Fatalf("view %+v", v)
		}
	})
	t.Run("KeylessServiceIsDeadLettered", func(t *testing.T) {
		id := rs.Send(t, "Notify", "", "send", nil, 0)
		rs.WaitRow(t, id, "completed", func(row map[string]any) bool { return row["status"] == "completed" })
		report(t, id)
		if !dlqHas(t, r.Pipeline, id, "tenant_unresolved") {
			t.Fatalf("no dead letter naming the keyless invocation %s", id)
		}
	})
}
