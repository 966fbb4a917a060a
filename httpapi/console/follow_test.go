package console

import (
	"context"
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
			req.Header.Set("Last-Event-ID", lastID)
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
