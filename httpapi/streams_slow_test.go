package httpapi_test

import (
	"bufio"
	"context"
	"iter"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// burstFeed yields one event, waits pause, then yields n events of 1 KiB
// and ends; with endless it yields them until the stream ends.
type burstFeed struct {
	pause   time.Duration
	n       int
	endless bool
}

func (f burstFeed) FollowEvents(ctx context.Context, _ substate.EventStreamQuery) iter.Seq2[substate.StoredEvent, error] {
	pad := strings.Repeat("x", 1<<10)
	event := func(seq uint64) substate.StoredEvent {
		return substate.StoredEvent{Seq: seq, Data: []byte(`{"data":{"tenantId":"acme-1","pad":"` + pad + `"}}`)}
	}
	return func(yield func(substate.StoredEvent, error) bool) {
		if !yield(event(1), nil) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.pause):
		}
		for seq := uint64(2); f.endless || seq <= uint64(f.n)+1; seq++ {
			if !yield(event(seq), nil) {
				return
			}
		}
	}
}

// TestEventStreamBurstAfterQuiet: a stream that was quiet for longer
// than the write timeout still delivers a burst larger than its buffers
// to a client that reads: the timeout counts from the burst's first
// write, not from the flush before the quiet.
func TestEventStreamBurstAfterQuiet(t *testing.T) {
	defer httpapi.SetEventWriteTimeout(100 * time.Millisecond)()
	const burst = 400 // 400 KiB, far past the stream's and the connection's buffers
	s := &httpapi.Server{Addr: "127.0.0.1:0", Events: burstFeed{pause: 400 * time.Millisecond, n: burst}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get(s.URL() + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "id: ") {
			got++
		}
	}
	if want := burst + 1; got != want {
		t.Errorf("read %d events (%v), want %d", got, sc.Err(), want)
	}
}

// TestEventStreamClientNotReading: a client that asks for the stream and
// never reads is closed once a write has waited the write timeout, and
// its place under MaxEventStreams is free again.
func TestEventStreamClientNotReading(t *testing.T) {
	defer httpapi.SetEventWriteTimeout(200 * time.Millisecond)()
	s := &httpapi.Server{Addr: "127.0.0.1:0", Limits: httpapi.Limits{MaxEventStreams: 1}, Events: burstFeed{endless: true}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := conn.Write([]byte("GET /v1/events HTTP/1.1\r\nHost: worker\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(s.URL() + "/v1/events?afterSeq=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream of a client that reads nothing still holds its place after 15s: %d", resp.StatusCode)
		}
	}
}
