package ratelog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a buffer the flush timer and a test may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON lines written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for l := range strings.Lines(s.b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, rec)
	}
	return out
}

// limited returns a logger limited to limit lines a message a second on
// a settable clock, writing JSON to the buffer.
func limited(limit int) (*slog.Logger, *clock, *syncBuffer) {
	buf := &syncBuffer{}
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}), limit).(*Handler)
	h.limits.now = c.now
	return slog.New(h), c, buf
}

// summary returns the record of held-back lines of msg, nil if none.
func summary(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if r["msg"] == Suppressed && r["message"] == msg {
			return r
		}
	}
	return nil
}

func TestLimit(t *testing.T) {
	for _, tt := range []struct {
		name             string
		lines            int
		level            slog.Level
		passed, held     int
		wantSummaryLevel string
	}{
		{"under the limit", 3, slog.LevelInfo, 3, 0, ""},
		{"at the limit", 5, slog.LevelInfo, 5, 0, ""},
		{"a burst of info", 50, slog.LevelInfo, 5, 45, "INFO"},
		{"a burst of warnings", 20, slog.LevelWarn, 5, 15, "WARN"},
		{"errors always pass", 50, slog.LevelError, 50, 0, ""},
		{"debug always passes", 50, slog.LevelDebug, 50, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log, c, buf := limited(5)
			for i := range tt.lines {
				log.Log(t.Context(), tt.level, "view changed", "tenant", fmt.Sprint("t", i))
			}
			c.add(time.Second)
			log.Info("view changed", "tenant", "next second") // ends the second: its summary comes first
			recs := buf.records(t)
			got := 0
			for _, r := range recs {
				if r["msg"] == "view changed" && r["tenant"] != "next second" {
					got++
				}
			}
			if got != tt.passed {
				t.Errorf("%d lines passed, want %d", got, tt.passed)
			}
			s := summary(recs, "view changed")
			switch {
			case tt.held == 0 && s != nil:
				t.Errorf("summary %v, want none", s)
			case tt.held > 0 && s == nil:
				t.Fatalf("no summary of %d lines held back: %v", tt.held, recs)
			case tt.held > 0:
				if s["suppressed"] != float64(tt.held) || s["passed"] != float64(tt.passed) || s["level"] != tt.wantSummaryLevel {
					t.Errorf("summary %v, want %d suppressed, %d passed at %s", s, tt.held, tt.passed, tt.wantSummaryLevel)
				}
				if last := recs[len(recs)-1]; last["tenant"] != "next second" {
					t.Errorf("the next second's line is not after the summary: %v", recs)
				}
			}
		})
	}
}

// Each message has its own count, shared by the loggers With makes.
func TestPerMessage(t *testing.T) {
	log, _, buf := limited(2)
	projector, feed := log.With("component", "projector"), log.With("component", "changefeed")
	for range 4 {
		projector.Info("view changed")
		feed.Info("view changed")
		feed.Info("change published")
	}
	counts := map[string]int{}
	for _, r := range buf.records(t) {
		counts[fmt.Sprint(r["component"], " ", r["msg"])]++
	}
	if got := counts["projector view changed"] + counts["changefeed view changed"]; got != 2 {
		t.Errorf("%d lines of view changed from both loggers, want 2 in all: %v", got, counts)
	}
	if got := counts["changefeed change published"]; got != 2 {
		t.Errorf("%d lines of change published, want 2: %v", got, counts)
	}
}

// A burst that stops is still reported, by the timer, about a second
// later.
func TestBurstThatStops(t *testing.T) {
	log, c, buf := limited(1)
	for range 10 {
		log.Warn("provider throttles")
	}
	c.add(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for summary(buf.records(t), "provider throttles") == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no summary within 5 s: %v", buf.records(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := summary(buf.records(t), "provider throttles"); s["suppressed"] != 9.0 {
		t.Errorf("summary %v, want 9 suppressed", s)
	}
}

// Messages past MaxMessages pass uncounted rather than grow the counts.
func TestManyMessages(t *testing.T) {
	log, c, buf := limited(1)
	for i := range MaxMessages + 10 {
		log.Info(fmt.Sprint("message ", i))
		log.Info(fmt.Sprint("message ", i))
	}
	h := log.Handler().(*Handler)
	if n := len(h.limits.counts); n > MaxMessages {
		t.Errorf("%d messages counted, want at most %d", n, MaxMessages)
	}
	if got, want := len(buf.records(t)), MaxMessages+20; got != want {
		t.Errorf("%d lines, want %d (each counted message once, the rest twice)", got, want)
	}
	c.add(time.Second)
	log.Info("a new one")
	if n := len(h.limits.counts); n > MaxMessages {
		t.Errorf("a new second: %d messages counted", n)
	}
}

func TestNoLimit(t *testing.T) {
	next := slog.NewTextHandler(&bytes.Buffer{}, nil)
	if got := New(next, 0); got != slog.Handler(next) {
		t.Errorf("New(next, 0) = %T, want next itself", got)
	}
}

// A program that stops within the second of a burst flushes: the lines
// held back are counted at once, not by a timer it does not live to see.
func TestFlushOnStop(t *testing.T) {
	log, _, buf := limited(1)
	for range 10 {
		log.Warn("provider throttles")
	}
	Flush(log.Handler())
	if s := summary(buf.records(t), "provider throttles"); s == nil || s["suppressed"] != 9.0 {
		t.Fatalf("summary right after Flush: %v, want 9 suppressed", s)
	}
	Flush(log.Handler()) // nothing more held: no second summary
	if n := len(buf.records(t)); n != 2 {
		t.Errorf("%d lines after a second Flush, want the one passed and the summary", n)
	}
	Flush(slog.NewTextHandler(&bytes.Buffer{}, nil)) // another handler: nothing to do
}
