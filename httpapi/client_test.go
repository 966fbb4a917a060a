package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/state"
)

func TestClientTenants(t *testing.T) {
	c := &httpapi.Client{URL: newServer(t, nil)}
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		v, err := c.Tenant(ctx, "t1")
		if err != nil || v.WorkflowSubState != substate.StateError {
			t.Fatalf("tenant t1: %+v, %v", v, err)
		}
		page, err := c.Tenants(ctx, substate.TenantFilter{HasError: true, MinRetryCount: 2})
		if err != nil || len(page.Tenants) != 1 || page.Tenants[0].TenantID != "t2" {
			t.Fatalf("tenants: %+v, %v", page, err)
		}
	})
	t.Run("Pages", func(t *testing.T) {
		var pages []int
		for page, err := range c.TenantPages(ctx, substate.TenantFilter{Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(page.Tenants))
		}
		all, err := c.AllTenants(ctx, substate.TenantFilter{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range all {
			ids = append(ids, v.TenantID)
		}
		if got, want := fmt.Sprint(pages, ids), "[1 1 1] [t0 t1 t2]"; got != want {
			t.Fatalf("pages and tenants %s, want %s", got, want)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := c.Tenant(ctx, "nobody")
		if substate.ErrorCode(err) != substate.ENOTFOUND {
			t.Fatalf("err = %v, want ENOTFOUND", err)
		}
		for _, err := range c.TenantPages(ctx, substate.TenantFilter{SubState: "sleeping"}) {
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("err = %v, want EINVALID", err)
			}
		}
	})
}

func TestClientCheckpointAndHistory(t *testing.T) {
	db := state.NewDB(filepath.Join(t.TempDir(), "view.db"))
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got substate.HistoryQuery
	reader := historyFunc(func(q substate.HistoryQuery) (substate.HistoryPage, error) {
		got = q
		return substate.HistoryPage{TenantID: q.TenantID, Transitions: []substate.Transition{}}, nil
	})
	srv := httptest.NewServer((&httpapi.Server{Checkpoint: db, History: reader, Logger: slog.Default()}).Handler())
	defer srv.Close()
	c := &httpapi.Client{URL: srv.URL}

	if p, err := c.Checkpoint(context.Background()); err != nil || p != (httpapi.ViewPosition{}) {
		t.Fatalf("checkpoint of an empty view: %+v, %v", p, err)
	}
	since := time.Date(2025, 3, 4, 9, 0, 0, 123456789, time.UTC)
	want := substate.HistoryQuery{TenantID: "acme/1", Since: since, Until: since.Add(time.Hour), AfterSeq: 7, Limit: 50, Raw: true}
	page, err := c.History(context.Background(), want)
	if err != nil || page.TenantID != want.TenantID {
		t.Fatalf("history: %+v, %v", page, err)
	}
	if !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) {
		t.Fatalf("server read %+v, want %+v", got, want)
	}
	got.Since, got.Until = want.Since, want.Until
	if got != want {
		t.Fatalf("server read %+v, want %+v", got, want)
	}
}

// historyFunc is a history reader made of a function.
type historyFunc func(substate.HistoryQuery) (substate.HistoryPage, error)

func (f historyFunc) History(_ context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	return f(q)
}

// TestClientForeignAnswer: an answer that is not the worker's JSON error
// (a proxy in front of it, here mounting it under /substate, failing)
// still says what came back.
func TestClientForeignAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream connect error\nreset", http.StatusBadGateway)
	}))
	defer srv.Close()
	c := &httpapi.Client{URL: srv.URL + "/substate"}
	_, err := c.Execution(context.Background(), "acme")
	if got, want := fmt.Sprint(err), "the worker answered HTTP 502 Bad Gateway: upstream connect error"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
}
