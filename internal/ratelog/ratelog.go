// Package ratelog bounds the log lines a burst writes: an slog.Handler
// that passes at most a number of lines of each message per second at
// info and warn, counts the rest, and says how many it held back in one
// line when the second is over. Debug lines (asked for) and errors
// (substate's own faults) always pass.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Suppressed is the message of the line that counts the lines held back.
const Suppressed = "log lines suppressed"

// MaxMessages bounds the messages counted at once: past it, the counts of
// messages quiet in the current second are forgotten, and a line of a new
// message passes uncounted until there is room again.
const MaxMessages = 1024

// Handler passes at most Limit lines of each message per second at info
// and warn to the handler it wraps.
type Handler struct {
	next   slog.Handler // with the attributes and groups of this handler
	limits *limits      // shared by the handlers WithAttrs and WithGroup make
}

// New returns a Handler that passes at most limit lines of each message
// per second to next; limit ≤ 0 returns next itself.
func New(next slog.Handler, limit int) slog.Handler {
	if limit <= 0 {
		return next
	}
	return &Handler{next: next, limits: &limits{base: next, limit: limit, now: time.Now, counts: map[string]*count{}}}
}

// Enabled reports whether next handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r to next unless its message already had its lines this
// second.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo || r.Level >= slog.LevelError || h.limits.admit(r.Message, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// Flush writes at once the lines that count what is held back so far,
// the current second's too: a program that stops within a second of a
// burst otherwise exits before the timer reports it.
func (h *Handler) Flush() { h.limits.flushAll() }

// Flush flushes h when it is a Handler, and does nothing otherwise.
func Flush(h slog.Handler) {
	if rh, ok := h.(*Handler); ok {
		rh.Flush()
	}
}

// WithAttrs returns a Handler whose lines have attrs, sharing h's counts.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), limits: h.limits}
}

// WithGroup returns a Handler whose attributes go in group name, sharing
// h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), limits: h.limits}
}

// limits are the counts of the current second, by message.
type limits struct {
	base  slog.Handler // the wrapped handler without attributes: the summaries go there
	limit int
	now   func() time.Time

	mu      sync.Mutex
	counts  map[string]*count
	flusher *time.Timer // pending while some count holds lines back
}

// count is one message's lines in the second that began at second.
type count struct {
	second int64
	passed int
	held   int
	level  slog.Level // the highest level held back
}

// admit counts a line of msg and reports whether it may pass.
func (l *limits) admit(msg string, level slog.Level) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.counts[msg]
	if !ok {
		if len(l.counts) >= MaxMessages && !l.forget(now.Unix()) {
			return true
		}
		c = &count{second: now.Unix()}
		l.counts[msg] = c
	}
	if c.second != now.Unix() {
		l.report(msg, c, now)
		*c = count{second: now.Unix()}
	}
	if c.passed < l.limit {
		c.passed++
		return true
	}
	c.held++
	c.level = max(c.level, level)
	if l.flusher == nil {
		l.flusher = time.AfterFunc(time.Second, l.flush)
	}
	return false
}

// forget drops the counts of messages with nothing held back that had no
// line this second, and reports whether that made room. l.mu is held.
func (l *limits) forget(second int64) bool {
	for msg, c := range l.counts {
		if c.second != second && c.held == 0 {
			delete(l.counts, msg)
		}
	}
	return len(l.counts) < MaxMessages
}

// flush reports the lines held back in seconds that are over: the timer's
// function, so that a burst that stops is still reported.
func (l *limits) flush() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flusher = nil
	pending := false
	for msg, c := range l.counts {
		if c.second != now.Unix() {
			l.report(msg, c, now)
			*c = count{second: now.Unix()}
		}
		pending = pending || c.held > 0
	}
	if pending {
		l.flusher = time.AfterFunc(time.Second, l.flush)
	}
}

// flushAll reports every count that holds lines back and stops the timer.
func (l *limits) flushAll() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flusher != nil {
		l.flusher.Stop()
		l.flusher = nil
	}
	for msg, c := range l.counts {
		l.report(msg, c, now)
	}
}

// report writes the line that says how many lines of msg c held back, if
// any. l.mu is held: the summaries of one message come in order.
func (l *limits) report(msg string, c *count, now time.Time) {
	if c.held == 0 {
		return
	}
	r := slog.NewRecord(now, c.level, Suppressed, 0)
	r.AddAttrs(slog.String("message", msg), slog.Int("suppressed", c.held), slog.Int("passed", c.passed),
		slog.Time("second", time.Unix(c.second, 0).UTC()))
	_ = l.base.Handle(context.Background(), r)
	c.held = 0
}
