package pipelinetest

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Clock is an injected clock whose Sleep moves time forward instead of
// waiting, and remembers how long it was asked to sleep.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleep moves the clock forward by d at once and returns ctx's error.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(max(d, 0))
	c.mu.Unlock()
	return ctx.Err()
}

// Slept returns the sleeps asked for so far and forgets them.
func (c *Clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slept
	c.slept = nil
	return s
}

// Logs is a JSON slog handler's output, safe for concurrent use.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends log output.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Count returns how many log lines contain s.
func (l *Logs) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range bytes.Lines(l.b.Bytes()) {
		if bytes.Contains(line, []byte(s)) {
			n++
		}
	}
	return n
}

// Logger returns a logger that writes to l at the debug level.
func (l *Logs) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Counter returns the value of one counter of a vector.
func Counter(tb testing.TB, v *prometheus.CounterVec, labels ...string) float64 {
	tb.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
