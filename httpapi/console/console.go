// Package console is substate's operator console: a web page served at /
// by the worker's HTTP server that shows every tenant's workflow live. It
// holds the page and its assets (embedded, no build step, no CDN), the few
// JSON routes the page needs beyond the query API (an overview, the dead
// letters and their requeue) and the Server-Sent Events stream that carries
// the change feed to open pages.
//
// Its routes are rows of the HTTP server's one route table (package
// httpapi, which this package imports for the principal, so the table
// takes the console through the httpapi.Console interface). The page and
// its assets hold no data and are served to anyone: a browser cannot send
// a key with a navigation, and the page is where one enters it. Every data
// route goes through the read API's Authorizer: they need ScopeRead, a
// key's tenant prefix narrows what they show, dead-letter payloads need
// read:raw and are redacted unless the caller is admin, and a requeue
// needs admin. A key limited to a tenant prefix requeues only a dead
// letter it lists, and only when every event it maps to is one of its
// tenants. On a loopback address without keys everything but the requeue
// is open, as the rest of the read API is.
package console

import (
	"cmp"
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/redact"
)

//go:embed assets
var assets embed.FS

// Console serves the operator console. Set its fields, then Open it before
// the server serves its Handlers, and Close it on the way out.
type Console struct {
	// Counts returns how many tenants each sub-state has, from the view's
	// counters (state.DB.Counts); nil leaves the counts out.
	Counts func(context.Context) (map[substate.SubState]int64, error)
	// StuckCounts returns how many tenants are stuck, by sub-state,
	// provider and workflow type, from the view's counters
	// (state.DB.StuckCounts); nil leaves the stuck counts out.
	StuckCounts func(context.Context) ([]substate.StuckCount, error)
	// Conn carries the change feed, substate.changes.>, and reports NATS's
	// health.
	Conn *nats.Conn
	// JS reads SUBSTATE_EVENTS for the activity chart, SUBSTATE_DLQ for the
	// dead letters, and the durable consumers' lag.
	JS jetstream.JetStream
	// Consumers are the durable consumers whose lag the overview shows.
	Consumers []Durable
	// LastSweep says when the reconciler last finished a sweep; nil when
	// there is no reconciler.
	LastSweep func() (time.Time, bool)
	// Requeue maps the raw message at a SUBSTATE_RAW sequence again
	// (renormalize) and returns how many events it published; nil leaves
	// requeue out. It maps first and publishes only when allow accepts
	// the tenant of every event mapped: otherwise it returns allow's
	// error and publishes nothing.
	Requeue func(ctx context.Context, rawSeq uint64, allow func(tenantID string) error) (int, error)
	// Redact redacts dead-letter payloads for callers that are not admin;
	// nil hides all provider input and output.
	Redact *redact.Policy
	// ClientBuffer is how many changes one open page may have waiting
	// before it is dropped; 0 means DefaultClientBuffer.
	ClientBuffer int
	// Resume is how many recent changes are kept for a page that
	// reconnects with Last-Event-ID; 0 means DefaultResume.
	Resume int
	// MaxStreams is how many change streams may be open at once; 0 means
	// DefaultMaxStreams. A stream holds its connection for as long as the
	// page is open, beyond the server's timeouts, so without a cap open
	// pages could take every connection the server allows (ingest
	// included). Above it a page is answered 503 and tries again.
	MaxStreams int
	// RestateUIURL is the URL of an invocation in the Restate UI, with
	// InvocationIDPlaceholder where the invocation id goes; the page links
	// a Restate tenant's execution to it. "" shows no link.
	RestateUIURL string
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	hub      *hub
	streams  chan struct{} // one token per stream being served
	feed     *follower     // the change feed's subscription, while pages are open
	activity *activity
}

// InvocationIDPlaceholder is where a Restate invocation id goes in
// Console.RestateUIURL.
const InvocationIDPlaceholder = "{invocationId}"

// Durable names a durable consumer on its stream.
type Durable struct{ Stream, Name string }

// Defaults of Console.
const (
	DefaultClientBuffer = 2048 // above a projector batch (512 by default), so one batch never drops a page
	DefaultResume       = 4096
	DefaultMaxStreams   = 1024 // a quarter of the HTTP server's default connection cap
)

// Open prepares the console. It follows the change feed only while a page
// has a change stream open (and a while after), so that with no page open
// the feed costs the worker nothing.
func (c *Console) Open() error {
	c.hub = newHub(cmp.Or(c.Resume, DefaultResume), cmp.Or(c.ClientBuffer, DefaultClientBuffer))
	c.streams = make(chan struct{}, cmp.Or(c.MaxStreams, DefaultMaxStreams))
	c.activity = &activity{js: c.JS, now: c.now}
	c.feed = &follower{conn: c.Conn, onMsg: c.onChange, forget: c.hub.forget, lost: c.hub.lost, linger: followLinger}
	return nil
}

// Close ends the subscription and every open stream.
func (c *Console) Close() error {
	if c.feed != nil {
		c.feed.close()
	}
	if c.hub != nil {
		c.hub.close()
	}
	return nil
}

// onChange passes one change-feed message to the open pages; gap says
// that changes before it may be missing.
func (c *Console) onChange(m *nats.Msg, gap bool) {
	ch, err := decodeChange(m.Data)
	if err != nil {
		c.logger().Warn("console: undecodable change-feed message", "subject", m.Subject, "err", err)
		return
	}
	c.hub.add(ch, gap)
}

// Handlers returns the console's handlers, which the HTTP server's route
// table mounts and guards (httpapi.Server.Console). Open the console
// first.
func (c *Console) Handlers() httpapi.ConsoleHandlers {
	static, _ := fs.Sub(assets, "assets")
	return httpapi.ConsoleHandlers{
		Page:        page(static),
		Assets:      noStore(http.FileServerFS(static)),
		Overview:    http.HandlerFunc(c.overview),
		DeadLetters: http.HandlerFunc(c.deadLetters),
		Requeue:     http.HandlerFunc(c.requeue),
		Changes:     http.HandlerFunc(c.changes),
	}
}

// page serves index.html with headers that keep it from being framed or
// from running anything but its own scripts.
func page(static fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(static, "index.html")
		if err != nil {
			http.Error(w, "console page missing", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		secure(h)
		_, _ = w.Write(b)
	})
}

func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		secure(w.Header())
		next.ServeHTTP(w, r)
	})
}

// secure sets the headers that confine the page: its own scripts and
// styles only, no inline script, no framing.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func (c *Console) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Console) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
