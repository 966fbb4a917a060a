package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/state"
)

// newServer serves a real view holding three tenants, and a /metrics
// that panics.
func newServer(tb testing.TB, ready func() error) string {
	tb.Helper()
	db := state.NewDB(filepath.Join(tb.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	var batch []substate.Sequenced
	for i, s := range []substate.SubState{substate.StateRunning, substate.StateError, substate.StateFailed} {
		d := substate.EventData{TenantID: fmt.Sprintf("t%d", i), Provider: substate.ProviderEngine, ExecutionID: "x",
			SubState: s, RetryCount: i, RetryCountKnown: true, Revision: 1, OccurredAt: time.Unix(100, 0)}
		if s != substate.StateRunning {
			d.ErrorMessage = "boom"
		}
		d.Normalize()
		batch = append(batch, substate.Sequenced{Seq: uint64(i + 1), Event: d})
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		tb.Fatal(err)
	}
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	s := &httpapi.Server{Addr: "127.0.0.1:0", Views: db, Ready: ready, Metrics: panics}
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s.URL()
}

func get(tb testing.TB, url string, v any) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("%s: Content-Type %q", url, ct)
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	raw := json.RawMessage{}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		tb.Fatalf("%s: body is not JSON: %v", url, err)
	}
	_ = json.Unmarshal(raw, &body)
	if v != nil {
		_ = json.Unmarshal(raw, v)
	}
	return resp.StatusCode, body.Error.Code
}

func TestTenantRoutes(t *testing.T) {
	url := newServer(t, nil)
	var one substate.TenantView
	if code, _ := get(t, url+"/v1/tenants/t1", &one); code != 200 || one.WorkflowSubState != substate.StateError || one.WorkflowErrorMessage != "boom" {
		t.Fatalf("get t1: %d %+v", code, one)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"t0", "t1", "t2"}},
		{"?subState=error", []string{"t1"}},
		{"?hasError=true", []string{"t1", "t2"}},
		{"?minRetryCount=1&sort=retryCount:desc", []string{"t2", "t1"}},
		{"?sort=tenantId:desc", []string{"t2", "t1", "t0"}},
		{"?hasError=true&sort=tenantId:desc", []string{"t2", "t1"}},
		{"?sort=retryCount:asc", []string{"t0", "t1", "t2"}},
		{"?minRetryCount=1&sort=retryCount:asc", []string{"t1", "t2"}},
	} {
		var page substate.TenantPage
		code, _ := get(t, url+"/v1/tenants"+tc.query, &page)
		var got []string
		for _, v := range page.Tenants {
			got = append(got, v.TenantID)
		}
		if code != 200 || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("list %q: %d %v, want %v", tc.query, code, got, tc.want)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/tenants/nobody", 404, substate.ENOTFOUND},
		{"/v1/tenants?subState=sleeping", 400, substate.EINVALID},
		{"/v1/tenants?hasError=maybe", 400, substate.EINVALID},
		{"/v1/tenants?minRetryCount=-1", 400, substate.EINVALID},
		{"/v1/tenants?limit=x", 400, substate.EINVALID},
		{"/v1/tenants?sort=name", 400, substate.EINVALID},
		{"/v1/tenants?pageToken=not-a-token", 400, substate.EINVALID},
		{"/nowhere", 404, substate.ENOTFOUND},
		{"/metrics", 500, substate.EINTERNAL}, // a handler that panics
	} {
		if status, code := get(t, url+tc.path, nil); status != tc.status || code != tc.code {
			t.Errorf("%s: %d %q, want %d %q", tc.path, status, code, tc.status, tc.code)
		}
	}
}

// TestTenantSortMirrors: each sort and its mirror list the same tenants
// in opposite orders, page by page, and a page token of one direction is
// a 400 for the other.
func TestTenantSortMirrors(t *testing.T) {
	url := newServer(t, nil)
	walk := func(query string) []string {
		t.Helper()
		var got []string
		for token := ""; ; {
			var page substate.TenantPage
			if code, _ := get(t, url+"/v1/tenants?limit=1&"+query+"&pageToken="+token, &page); code != 200 {
				t.Fatalf("%s: %d", query, code)
			}
			for _, v := range page.Tenants {
				got = append(got, v.TenantID)
			}
			if token = page.NextPageToken; token == "" || len(got) > 3 {
				return got
			}
		}
	}
	for _, pair := range [][2]string{{"", "sort=tenantId:desc"}, {"sort=retryCount:desc", "sort=retryCount:asc"},
		{"sort=updatedAt:desc", "sort=updatedAt:asc"}, {"hasError=true", "hasError=true&sort=tenantId:desc"}} {
		forward, reverse := walk(pair[0]), walk(pair[1])
		slices.Reverse(reverse)
		if len(forward) < 2 || !slices.Equal(forward, reverse) {
			t.Errorf("%q lists %v, %q lists the reverse of %v", pair[0], forward, pair[1], reverse)
		}
		for _, from := range pair {
			var page substate.TenantPage
			get(t, url+"/v1/tenants?limit=1&"+from, &page)
			other := pair[0]
			if from == other {
				other = pair[1]
			}
			status, code := get(t, url+"/v1/tenants?limit=1&"+other+"&pageToken="+page.NextPageToken, nil)
			if page.NextPageToken == "" || status != 400 || code != substate.EINVALID {
				t.Errorf("the token of %q given to %q: %d %q, want 400 %s", from, other, status, code, substate.EINVALID)
			}
		}
	}
}

// A worker that is not ready says why once, in its answer and in its log.
func TestReadyzSaysWhyOnce(t *testing.T) {
	var logs bytes.Buffer
	s := &httpapi.Server{Addr: "127.0.0.1:0", Ready: func() error { return errors.New("nats is not connected") },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	if code, _ := get(t, s.URL()+"/readyz", &body); code != 503 || body.Error.Message != "not ready: nats is not connected" {
		t.Fatalf("readyz: %d %q", code, body.Error.Message)
	}
	if n := strings.Count(logs.String(), "nats is not connected"); n != 1 {
		t.Fatalf("the log says the cause %d times:\n%s", n, logs.String())
	}
}

func TestHealth(t *testing.T) {
	var notReady error
	url := newServer(t, func() error { return notReady })
	if code, _ := get(t, url+"/healthz", nil); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	if code, _ := get(t, url+"/readyz", nil); code != 200 {
		t.Errorf("readyz when ready: %d", code)
	}
	notReady = errors.New("nats is not connected")
	if code, errCode := get(t, url+"/readyz", nil); code != 503 || errCode != substate.EUNAVAILABLE {
		t.Errorf("readyz when not ready: %d %q", code, errCode)
	}
}
