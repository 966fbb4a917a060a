package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/httpx"
)

// decodeChange reads one change-feed message, a CloudEvent around the
// change. It is the one place that knows the feed's payload.
func decodeChange(m *nats.Msg) (substate.Change, error) {
	e, err := substate.UnmarshalChangeEvent(m.Data)
	if err != nil {
		return substate.Change{}, err
	}
	ch := e.Data
	if ch.TenantID == "" {
		ch.TenantID = ch.New.TenantID
	}
	return ch, nil
}

// event is one change as the stream sends it: its sequence is the SSE id.
type event struct {
	seq      uint64
	tenantID string
	frame    []byte // the SSE frame, formatted once for every stream
}

// streamChange is a change as the page reads it: the old view's sub-state
// is all it needs of the old view, and half the bytes of every stream.
type streamChange struct {
	Seq         uint64              `json:"seq"`
	TenantID    string              `json:"tenantId"`
	OldSubState substate.SubState   `json:"oldSubState"`
	New         substate.TenantView `json:"new"`
}

// client is one open stream. Its channel is closed when the hub drops it.
type client struct {
	ch      chan event
	dropped bool // set by the hub, under its lock, when ch overflowed
}

// hub fans the change feed out to the open streams. Publishing never
// blocks: a stream whose buffer is full is dropped (its page reconnects
// and resumes from Last-Event-ID), so a slow browser costs the feed
// nothing.
type hub struct {
	mu sync.Mutex
	// ring keeps the last changes for resume: a circular buffer whose
	// oldest entry is ring[next] once it is full.
	ring   []event
	next   int
	size   int
	buffer int
	last   uint64 // highest sequence published
	// since is the sequence after which the hub holds every change, once
	// known: from the first change it saw (changes are published in
	// sequence order), then from the last one it let go of. Sequences
	// have gaps (an event that changes nothing is no change), so what a
	// page missed is judged by it, not by the oldest kept sequence.
	since      uint64
	sinceKnown bool
	clients    map[*client]struct{}
	closed     bool
	dropped    int // streams dropped for being slow, since start
}

func newHub(resume, buffer int) *hub {
	return &hub{size: max(resume, 1), buffer: max(buffer, 1), clients: map[*client]struct{}{}}
}

// publish sends ch to every stream. A sequence at or below the last one
// is a duplicate (another replica's feed, or a redelivery) and is skipped.
func (h *hub) publish(ch substate.Change) { h.add(ch, false) }

// add publishes ch; with gap, changes before it may be missing, so a page
// cannot resume from the changes kept until one comes without.
func (h *hub) add(ch substate.Change, gap bool) {
	data, err := json.Marshal(streamChange{Seq: ch.Seq, TenantID: ch.TenantID, OldSubState: ch.Old.WorkflowSubState, New: ch.New})
	if err != nil {
		return
	}
	frame := fmt.Appendf(nil, "id: %d\nevent: change\ndata: %s\n\n", ch.Seq, data)
	ev := event{seq: ch.Seq, tenantID: ch.TenantID, frame: frame}
	h.mu.Lock()
	defer h.mu.Unlock()
	if gap {
		defer func() { h.sinceKnown = false }() // before the unlock: defers run last first
	}
	if h.closed || ch.Seq != 0 && ch.Seq <= h.last {
		return
	}
	h.last = max(h.last, ch.Seq)
	if !h.sinceKnown && ch.Seq != 0 {
		h.since, h.sinceKnown = ch.Seq-1, true
	}
	if len(h.ring) < h.size {
		h.ring = append(h.ring, ev)
	} else {
		h.since = max(h.since, h.ring[h.next].seq)
		h.ring[h.next] = ev
		h.next = (h.next + 1) % h.size
	}
	for c := range h.clients {
		select {
		case c.ch <- ev:
		default:
			h.drop(c)
		}
	}
}

// drop closes a slow client's channel. h.mu must be held.
func (h *hub) drop(c *client) {
	delete(h.clients, c)
	c.dropped = true
	close(c.ch)
	h.dropped++
}

// subscribe adds a client and returns the changes after lastID that it
// missed; resumable is false when the hub cannot tell that they are all
// kept (the page must reload what it shows).
func (h *hub) subscribe(lastID uint64, resuming bool) (c *client, missed []event, resumable bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c = &client{ch: make(chan event, h.buffer)}
	if h.closed {
		close(c.ch)
		return c, nil, true
	}
	h.clients[c] = struct{}{}
	if !resuming {
		return c, nil, true
	}
	for i := range h.ring {
		if ev := h.ring[(h.next+i)%len(h.ring)]; ev.seq > lastID {
			missed = append(missed, ev)
		}
	}
	return c, missed, h.sinceKnown && lastID >= h.since
}

// forget drops the changes kept for resume: the hub no longer sees every
// change, so a page that comes back must reload what it shows.
func (h *hub) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring, h.next, h.sinceKnown = nil, 0, false
}

// lost is a gap in the changes the hub was handed that no sequence shows
// (NATS dropped some the console was slow to take): it forgets what it
// kept for resume and closes every stream, so that each page reconnects,
// is told to reset and reloads what it shows.
func (h *hub) lost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring, h.next, h.sinceKnown = nil, 0, false
	for c := range h.clients {
		delete(h.clients, c)
		close(c.ch)
	}
}

func (h *hub) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.ch)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		delete(h.clients, c)
		close(c.ch)
	}
}

// stats returns the open streams and the streams dropped since start.
func (h *hub) stats() (open, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients), h.dropped
}

// changes serves GET /console/api/changes: Server-Sent Events, one
// "change" event per view change with the change's sequence as its id. A
// page that reconnects sends Last-Event-ID and gets what it missed, or a
// "reset" event when the console no longer keeps it.
func (c *Console) changes(w http.ResponseWriter, r *http.Request) {
	p, _ := httpapi.PrincipalFrom(r.Context())
	var lastID uint64
	resuming := false
	if s := r.Header.Get(substate.HeaderLastEventID); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		resuming, lastID = err == nil, n
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE,
			"%d console streams are open, as many as this worker serves; the page tries again", cap(c.streams)), nil)
		return
	}
	if err := c.feed.start(); err != nil {
		httpx.Error(w, r, err, nil)
		return
	}
	defer c.feed.stop()
	cl, missed, resumable := c.hub.subscribe(lastID, resuming)
	defer c.hub.unsubscribe(cl)
	es := httpx.NewEventStream(w, streamWriteTimeout)
	defer es.Close()
	fmt.Fprintf(es, "retry: 1000\n\n")
	if !resumable {
		fmt.Fprintf(es, "event: reset\ndata: {}\n\n")
	}
	for _, ev := range missed {
		writeEvent(es, p, ev)
	}
	if es.Flush() != nil {
		return
	}
	stream(r.Context(), es, p, cl)
}

// stream writes the client's changes until it is dropped or the request
// ends.
func stream(ctx context.Context, es *httpx.EventStream, p httpapi.Principal, cl *client) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-es.KeepAlive():
			fmt.Fprintf(es, ": keep-alive\n\n")
		case ev, ok := <-cl.ch:
			if !ok {
				return // dropped for being slow, or the console closed: the page reconnects
			}
			writeEvent(es, p, ev)
		case <-es.Due():
			if es.Flush() != nil {
				return
			}
		}
	}
}

// streamWriteTimeout is how long a write of a stream waits for its page:
// one that stops reading (its connection's buffers full) is closed after
// it instead of holding the connection and its goroutine for good.
var streamWriteTimeout = 10 * time.Second

// writeEvent writes one change, when the principal may see its tenant.
func writeEvent(w io.Writer, p httpapi.Principal, ev event) {
	if !p.SeesTenant(ev.tenantID) {
		return
	}
	_, _ = w.Write(ev.frame)
}
