package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/state"
)

func TestGroupRoute(t *testing.T) {
	base := newServer(t, nil)
	c := &httpapi.Client{URL: base}
	ctx := context.Background()
	page, err := c.Groups(ctx, substate.GroupQuery{By: substate.GroupBySubState})
	if err != nil {
		t.Fatal(err)
	}
	if page.By != substate.GroupBySubState || page.Total != 3 || page.GroupCount != 3 || page.Scanned != 0 || len(page.Groups) != 3 {
		t.Fatalf("by subState: %+v", page)
	}
	for _, g := range page.Groups {
		if g.Count != 1 || g.SampleTenantID == "" || !g.FirstSeen.Equal(time.Unix(100, 0)) || !g.LastSeen.Equal(g.FirstSeen) {
			t.Errorf("group %+v", g)
		}
	}
	page, err = c.Groups(ctx, substate.GroupQuery{By: substate.GroupByProvider, Filter: substate.TenantFilter{HasError: true, MinRetryCount: 2}, Limit: 1})
	if err != nil || page.Total != 1 || page.Scanned == 0 || len(page.Groups) != 1 || page.Groups[0].Value != "engine" || page.Groups[0].SampleTenantID != "t2" {
		t.Fatalf("by provider of the tenants with an error and 2 retries: %+v, %v", page, err)
	}
	for _, tc := range []struct {
		query string
		want  string // a part of the message
	}{
		{"", "by is required"},
		{"by=color", "fingerprint, subState, provider, step or workflowType"},
		{"by=step&subState=sleeping", "unknown sub-state"},
		{"by=step&substate=failed", "unknown query parameter \"substate\"; the valid ones are by, limit, subState"},
		{"by=step&pageToken=x", "unknown query parameter \"pageToken\""},
		{"by=step&by=provider", "given 2 times"},
		{"by=step&inStateLongerThan=5", "want a duration"},
		{"by=step&verb=resting", "unknown verb"},
	} {
		var body struct {
			Error struct{ Code, Message string }
		}
		status, code := get(t, base+"/v1/groups?"+tc.query, &body)
		if status != 400 || code != substate.EINVALID || !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%q: %d %s %q, want 400 with %q", tc.query, status, code, body.Error.Message, tc.want)
		}
	}
}

// TestTenantsStrictParameters: a parameter GET /v1/tenants does not know,
// or one given twice, is a 400 that names the valid ones instead of a
// listing of every tenant.
func TestTenantsStrictParameters(t *testing.T) {
	base := newServer(t, nil)
	for _, query := range []string{"substate=failed", "has_error=true", "subState=failed&subState=error", "fingerprint=" + strings.Repeat("x", 201)} {
		var body struct {
			Error struct{ Code, Message string }
		}
		status, code := get(t, base+"/v1/tenants?"+query, &body)
		if status != 400 || code != substate.EINVALID {
			t.Errorf("%q: %d %s, want 400", query, status, code)
		}
		if name, _, _ := strings.Cut(query, "="); !strings.Contains(body.Error.Message, name) {
			t.Errorf("%q: %q does not name the parameter", query, body.Error.Message)
		}
	}
	var page substate.TenantPage
	q := url.Values{"verb": {"failed"}, "inStateLongerThan": {"1h"}, "fingerprint": {""}}
	if status, _ := get(t, base+"/v1/tenants?"+q.Encode(), &page); status != 200 || len(page.Tenants) != 1 || page.Tenants[0].TenantID != "t2" {
		t.Errorf("verb=failed, in state for an hour: %d %+v", status, page)
	}
}

// TestScopedGroups: a key with a tenant prefix counts only its tenants,
// whatever prefix it asks for.
func TestScopedGroups(t *testing.T) {
	db := openView(t, scopedTenants...)
	ctx := context.Background()
	for _, tc := range []struct {
		key, ask string
		total    int64
	}{
		{"acme-", "", 3},
		{"acme-", "acme-2", 1},
		{"acme-", "a", 3},
		{"acme-", "beta", 0},
		{"", "acme", 4},
	} {
		page, err := httpapi.ScopedViews(db, tc.key).Groups(ctx, substate.GroupQuery{By: substate.GroupBySubState, Filter: substate.TenantFilter{TenantPrefix: tc.ask}})
		if err != nil || page.Total != tc.total {
			t.Errorf("key %q asking %q: %d tenants (%+v), want %d; %v", tc.key, tc.ask, page.Total, page, tc.total, err)
		}
		for _, g := range page.Groups {
			if !strings.HasPrefix(g.SampleTenantID, tc.key) {
				t.Errorf("key %q sees sample %q", tc.key, g.SampleTenantID)
			}
		}
	}
}

func TestGroupQueryRoundTrip(t *testing.T) {
	for _, q := range []substate.GroupQuery{
		{By: substate.GroupByFingerprint},
		{By: substate.GroupByStep, Limit: 7, Filter: substate.TenantFilter{SubState: substate.StateFailed, HasError: true, MinRetryCount: 2,
			Provider: substate.ProviderRestate, TenantPrefix: "acme/ä&", Fingerprint: "restate/500/x <n>", Verb: substate.VerbCancelled,
			InStateLongerThan: 90 * time.Minute, Step: "Charge", WorkflowType: "billing"}},
	} {
		got, err := httpapi.ParseGroupQuery(httpapi.EncodeGroupQuery(q))
		if err != nil || got != q {
			t.Errorf("%+v parsed back as %+v, %v", q, got, err)
		}
	}
}

// TestStepAndWorkflowTypeFilters: GET /v1/tenants and GET /v1/groups
// select by step and by workflow type, and a group query by sub-state
// with one of them is answered from counters (nothing scanned).
func TestStepAndWorkflowTypeFilters(t *testing.T) {
	db := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var batch []substate.Sequenced
	for i, tc := range []struct {
		workflow, step string
		ss             substate.SubState
	}{
		{"billing", "Charge", substate.StateFailed}, {"billing", "Charge", substate.StateRunning}, {"billing", "Refund", substate.StateFailed},
		{"provision", "Charge", substate.StateFailed}, {"provision", "", substate.StateRunning},
	} {
		d := substate.EventData{TenantID: fmt.Sprintf("t%d", i), Provider: substate.ProviderEngine, ExecutionID: "x", Workflow: tc.workflow,
			Step: tc.step, SubState: tc.ss, Revision: 1, OccurredAt: time.Unix(100, 0)}
		d.Normalize()
		batch = append(batch, substate.Sequenced{Seq: uint64(i + 1), Event: d})
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", Views: db}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for query, want := range map[string]string{
		"step=Charge":                          "t0 t1 t3",
		"step=Charge&workflowType=billing":     "t0 t1",
		"workflowType=provision":               "t3 t4",
		"workflowType=billing&subState=failed": "t0 t2",
		"step=Nowhere":                         "",
	} {
		var page substate.TenantPage
		if status, _ := get(t, s.URL()+"/v1/tenants?"+query, &page); status != 200 {
			t.Fatalf("%s: %d", query, status)
		}
		var got []string
		for _, v := range page.Tenants {
			got = append(got, v.TenantID)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != want {
			t.Errorf("%s: tenants %v, want %s", query, got, want)
		}
	}
	var page substate.GroupPage
	if status, _ := get(t, s.URL()+"/v1/groups?by=subState&step=Charge", &page); status != 200 || page.Total != 3 || page.Scanned != 0 ||
		len(page.Groups) != 2 || page.Groups[0].Value != "failed" || page.Groups[0].Count != 2 {
		t.Errorf("by subState at step Charge: %d %+v, want 2 failed, 1 running, from counters", status, page)
	}
	if status, _ := get(t, s.URL()+"/v1/groups?by=step&workflowType=billing", &page); status != 200 || page.Total != 3 ||
		len(page.Groups) != 2 || page.Groups[0].Value != "Charge" || page.Groups[0].Count != 2 {
		t.Errorf("by step of workflow type billing: %d %+v, want Charge 2, Refund 1", status, page)
	}
}
