package restate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/restate"
	"github.com/substatehq/substate/testkit/restatetest"
)

// unknownInvocation is a well-formed invocation id no server knows.
const unknownInvocation = "inv_10000000000a0000000000000000000000"

// TestClientAgainstRestate checks, on a real Restate 1.7 server, the
// answer of every action the client takes and of every refusal it knows.
func TestClientAgainstRestate(t *testing.T) {
	ctx := context.Background()
	rs := restatetest.Start(t)
	c := restate.NewClient(rs.AdminURL)
	status := func(want string) func(map[string]any) bool {
		return func(row map[string]any) bool { return row["status"] == want }
	}
	napping := func(key string) string {
		id := rs.Send(t, "Provision", key, "nap", nil, 0)
		rs.WaitRow(t, id, "suspended", status("suspended"))
		return id
	}
	done := rs.Send(t, "Provision", "c-done", "terminal", nil, 0)
	rs.WaitRow(t, done, "completed", status("completed"))

	t.Run("OK", func(t *testing.T) {
		paused := rs.Send(t, "Provision", "c-paused", "stuck", nil, 0)
		rs.WaitRow(t, paused, "paused", status("paused"))
		for _, tc := range []struct {
			action, id string
			want       []int
		}{
			{"cancel", napping("c-cancel"), []int{http.StatusOK, http.StatusAccepted}},
			{"kill", napping("c-kill"), []int{http.StatusOK}},
			{"resume", paused, []int{http.StatusOK}},
			{"restart-as-new", done, []int{http.StatusOK}},
		} {
			a, err := c.Patch(ctx, tc.id, tc.action)
			if err != nil || !slices.Contains(tc.want, a.Status) {
				t.Errorf("%s: answer %d %s, %v; want one of %v", tc.action, a.Status, a.Body, err, tc.want)
			}
		}
	})
	t.Run("Refused", func(t *testing.T) {
		running := napping("c-running")
		for _, tc := range []struct {
			action, id, code, says string
		}{
			{"cancel", done, substate.ECONFLICT, "already completed"},
			{"kill", done, substate.ECONFLICT, "already completed"},
			{"resume", done, substate.ECONFLICT, "cannot be resumed"},
			{"restart-as-new", running, substate.ECONFLICT, "still running"},
			{"cancel", unknownInvocation, substate.ENOTFOUND, "not found"},
			{"kill", unknownInvocation, substate.ENOTFOUND, "not found"},
			{"resume", unknownInvocation, substate.ENOTFOUND, "not found"},
			{"restart-as-new", unknownInvocation, substate.ENOTFOUND, "not found"},
			{"cancel", "inv_1bad", substate.EINVALID, "not a Restate invocation id"},
			{"purge", done, substate.EINVALID, "not an invocation action"},
		} {
			_, err := c.Patch(ctx, tc.id, tc.action)
			if substate.ErrorCode(err) != tc.code || !strings.Contains(substate.ErrorMessage(err), tc.says) {
				t.Errorf("%s of %s: %v (%s); want %s saying %q", tc.action, tc.id, err, substate.ErrorCode(err), tc.code, tc.says)
			}
		}
	})
	t.Run("QueryAndGet", func(t *testing.T) {
		rows, err := c.Query(ctx, "SELECT id, status FROM sys_invocation WHERE id = '"+done+"'")
		if err != nil || len(rows) != 1 || !strings.Contains(string(rows[0]), `"completed"`) {
			t.Fatalf("query: %s, %v", rows, err)
		}
		svc, err := c.Get(ctx, "/services/Provision", "services")
		if err != nil || !strings.Contains(string(svc), `"name":"Provision"`) {
			t.Fatalf("get: %.200s, %v", svc, err)
		}
		if _, err := c.Get(ctx, "/services/Nope", "services"); substate.ErrorCode(err) != substate.ENOTFOUND {
			t.Fatalf("get of an unknown service: %v", err)
		}
		if _, err := c.Query(ctx, "SELECT nope FROM sys_invocation"); substate.ErrorCode(err) == "" || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("a query Restate refuses: %v", err)
		}
	})
}

// TestClientLimits: every call, a query or an action, has the same bound
// on the answer, the same timeout, and reads a status it does not expect
// the same way.
func TestClientLimits(t *testing.T) {
	ctx := context.Background()
	var answer atomic.Value // func(http.ResponseWriter, *http.Request)
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization") + " " + r.Header.Get("Accept"))
		answer.Load().(func(http.ResponseWriter, *http.Request))(w, r)
	}))
	t.Cleanup(srv.Close)
	reply := func(status int, body []byte) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status); w.Write(body) }
	}
	c := restate.NewClient(srv.URL)
	c.Token = "s3cret"
	// A generous timeout, so reading a 32 MiB answer under -race on a
	// busy machine ends by the size bound; the Timeout case shortens it.
	c.HTTP.Timeout = 30 * time.Second
	calls := map[string]func() error{
		"query":  func() error { _, err := c.Query(ctx, "SELECT 1"); return err },
		"get":    func() error { _, err := c.Get(ctx, "/services/Provision", "services"); return err },
		"kill":   func() error { _, err := c.Patch(ctx, unknownInvocation, "kill"); return err },
		"resume": func() error { _, err := c.Patch(ctx, unknownInvocation, "resume"); return err },
	}
	huge := append(append([]byte(`{"rows":[],"pad":"`), bytes.Repeat([]byte("x"), restate.MaxResponse)...), `"}`...)
	// hang answers after the client gave up: it reads the request, so the
	// server notices the client leave, and waits.
	hang := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	message := func(m string) []byte { b, _ := json.Marshal(map[string]string{"message": m}); return b }
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
		code   string
		says   string
	}{
		{"TooLarge", reply(http.StatusOK, huge), substate.EINVALID, "more than 32 MiB"},
		{"UnexpectedSuccess", reply(http.StatusNoContent, nil), substate.EUNAVAILABLE, "HTTP 204"},
		{"Unavailable", reply(http.StatusServiceUnavailable, message("routing failed")), substate.EUNAVAILABLE, "routing failed"},
		{"Throttled", reply(http.StatusTooManyRequests, nil), substate.ETHROTTLED, "HTTP 429"},
		{"Unauthorized", reply(http.StatusUnauthorized, message("bad token")), substate.EUNAUTHORIZED, "bad token"},
		{"Gone", reply(http.StatusGone, message("the input is not available")), substate.ECONFLICT, "input is not available"},
		{"TooEarly", reply(http.StatusTooEarly, message("inboxed")), substate.ECONFLICT, "inboxed"},
		{"BadRequest", reply(http.StatusBadRequest, message("bad field")), substate.EINVALID, "bad field"},
		{"Timeout", hang, substate.EUNAVAILABLE, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer.Store(tc.answer)
			if tc.name == "Timeout" {
				c.HTTP.Timeout = 200 * time.Millisecond
			}
			for name, call := range calls {
				err := call()
				if substate.ErrorCode(err) != tc.code || !strings.Contains(substate.ErrorMessage(err), tc.says) {
					t.Errorf("%s: %v (%s); want %s saying %q", name, err, substate.ErrorCode(err), tc.code, tc.says)
				}
				if got := auth.Load(); got != "Bearer s3cret application/json" {
					t.Errorf("%s: sent %q, want the bearer token and Accept: application/json", name, got)
				}
			}
		})
	}
	t.Run("AcceptedCancel", func(t *testing.T) {
		answer.Store(reply(http.StatusAccepted, nil))
		if a, err := c.Patch(ctx, unknownInvocation, "cancel"); err != nil || a.Status != http.StatusAccepted {
			t.Fatalf("cancel answered 202: %+v, %v; want accepted", a, err)
		}
		if _, err := c.Patch(ctx, unknownInvocation, "kill"); substate.ErrorCode(err) != substate.EUNAVAILABLE {
			t.Fatalf("kill answered 202: %v; want EUNAVAILABLE (Restate answers 200 when it killed)", err)
		}
	})
}
