package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/natstest"
)

// The console follows the change feed only while a page has a stream
// open, and a while after: with no page open it holds no subscription,
// and a page that comes back after it stopped following is told to reset.
func TestFollowsFeedOnlyWithStreamsOpen(t *testing.T) {
	nc := natstest.Conn(t, natstest.Server(t))
	c := &Console{Conn: nc}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.feed.linger = 50 * time.Millisecond
	srv := httptest.NewServer((&httpapi.Server{Console: c, Auth: &httpapi.Authorizer{AllowAnonymous: true}}).Handler())
	defer srv.Close()
	publish := func(seq uint64) {
		body, err := substate.MarshalChangeEvent(change(seq, "t"), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(substate.SubjectChangesPrefix+"t", body); err != nil {
			t.Fatal(err)
		}
	}
	if c.feed.following() || nc.NumSubscriptions() != 0 {
		t.Fatal("subscribed to the change feed with no page open")
	}
	open := func(lastID string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/api/changes", nil)
		if lastID != "" {
			req.Header.Set(substate.HeaderLastEventID, lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	resp, cancel := open("")
	publish(1) // the stream is open: it sees every change after
	if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["id"] != "1" {
		t.Fatalf("events %v", evs)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return !c.feed.following() })
	publish(2) // nobody follows: not seen
	resp, cancel = open("1")
	defer cancel()
	defer resp.Body.Close()
	if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["event"] != "reset" {
		t.Fatalf("a page back after the console stopped following: events %v, want a reset", evs)
	}
	publish(3)
	if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["id"] != "3" {
		t.Fatalf("events %v", evs)
	}
}

// TestFeedDropsResetPages: when NATS drops change-feed messages because
// the console was slow to take them, the open pages miss changes that no
// sequence shows: their streams are closed, and a page that comes back is
// told to reset rather than resumed.
func TestFeedDropsResetPages(t *testing.T) {
	defer func(n int) { feedPendingMsgs = n }(feedPendingMsgs)
	feedPendingMsgs = 4
	nc := natstest.Conn(t, natstest.Server(t))
	c := &Console{Conn: nc}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer((&httpapi.Server{Console: c, Auth: &httpapi.Authorizer{AllowAnonymous: true}}).Handler())
	t.Cleanup(srv.Close) // after the streams' cleanups, which end them
	publish := func(seq uint64) {
		body, err := substate.MarshalChangeEvent(change(seq, "t"), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(substate.SubjectChangesPrefix+"t", body); err != nil {
			t.Fatal(err)
		}
	}
	open := func(lastID string) *http.Response {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/api/changes", nil)
		if lastID != "" {
			req.Header.Set(substate.HeaderLastEventID, lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := open("")
	publish(1)
	if evs := sseEvents(t, resp, 1); len(evs) != 1 || evs[0]["id"] != "1" {
		t.Fatalf("events %v", evs)
	}

	c.hub.mu.Lock() // the console takes nothing: its subscription's messages pile up
	for seq := uint64(2); seq <= 20; seq++ {
		publish(seq)
	}
	if err := nc.Flush(); err != nil { // the connection has read them all: past 4 pending, dropped
		t.Fatal(err)
	}
	c.hub.mu.Unlock()
	publish(21)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream of a page that missed changes NATS dropped was not closed: %v", err)
	}
	back := open("1")
	if evs := sseEvents(t, back, 1); len(evs) != 1 || evs[0]["event"] != "reset" {
		t.Fatalf("a page back after changes were dropped: events %v, want a reset", evs)
	}
}
