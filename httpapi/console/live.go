package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/httpx"
)

// feedDecoding decodes change-feed messages, which the projector encodes
// with each member once: checking for names given twice would cost a
// third of the decoding.
var feedDecoding = jsontext.AllowDuplicateNames(true)

// liveChange is what the pages read of a change: the old view's sub-state
// is all they need of the old view, and half the bytes of every stream.
type liveChange struct {
	seq         uint64
	tenantID    string
	oldSubState substate.SubState
	new         []byte // the new view, as the change feed encoded it
}

// frame formats the change's SSE frame: its sequence is the SSE id, and
// its data {"seq","tenantId","oldSubState","new"}.
func (ch liveChange) frame() []byte {
	b := make([]byte, 0, len(ch.new)+len(ch.tenantID)+96)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ch.seq, 10)
	b = append(b, "\nevent: change\ndata: {\"seq\":"...)
	b = strconv.AppendUint(b, ch.seq, 10)
	b = append(b, `,"tenantId":`...)
	b, _ = jsontext.AppendQuote(b, ch.tenantID)
	b = append(b, `,"oldSubState":`...)
	b, _ = jsontext.AppendQuote(b, string(ch.oldSubState))
	b = append(b, `,"new":`...)
	if len(ch.new) == 0 {
		b = append(b, "null"...)
	}
	b = append(b, ch.new...)
	return append(b, "}\n\n"...)
}

// event is one change as the stream sends it: its sequence is the SSE id.
type event struct {
	seq      uint64
	tenantID string
	frame    []byte // the SSE frame, formatted once for every stream
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

// add publishes ch; with gap, changes before it may be missing, so a page
// cannot resume from the changes kept until one comes without.
func (h *hub) add(ch liveChange, gap bool) {
	ev := event{seq: ch.seq, tenantID: ch.tenantID, frame: ch.frame()}
	h.mu.Lock()
	defer h.mu.Unlock()
	if gap {
		defer func() { h.sinceKnown = false }() // before the unlock: defers run last first
	}
	if h.closed || ch.seq != 0 && ch.seq <= h.last {
		return
	}
	h.last = max(h.last, ch.seq)
	if !h.sinceKnown && ch.seq != 0 {
		h.since, h.sinceKnown = ch.seq-1, true
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
