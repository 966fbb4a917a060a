package consumers

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failure that repeats batch after batch is logged at once, then once a
// period with the count left out; the streak's start and last error are
// kept until a batch succeeds, which is said once.
func TestFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	f := &failures{every: 10 * time.Second, now: func() time.Time { return now }}
	if _, err := f.failing(); err != nil {
		t.Fatalf("failing before any failure: %v", err)
	}
	boom := errors.New("page 7 is corrupt")
	start := now
	for range 250 { // 25 a second for 10 s
		f.fail(log, "apply batch failed", boom)
		now = now.Add(40 * time.Millisecond)
	}
	f.fail(log, "apply batch failed", boom)
	if got, want := strings.Count(buf.String(), "apply batch failed"), 2; got != want {
		t.Fatalf("%d lines for 251 failures over 10 s, want %d:\n%s", got, want, buf.String())
	}
	if !strings.Contains(buf.String(), "not_logged=249") || !strings.Contains(buf.String(), "failures=251") {
		t.Errorf("the second line does not count what it left out:\n%s", buf.String())
	}
	if since, err := f.failing(); !since.Equal(start) || err != boom {
		t.Fatalf("failing: %v %v, want since %v with the last error", since, err, start)
	}
	f.succeed(log, "batches apply again")
	f.succeed(log, "batches apply again")
	if since, err := f.failing(); err != nil || !since.IsZero() {
		t.Fatalf("failing after a success: %v %v", since, err)
	}
	if got := strings.Count(buf.String(), "batches apply again"); got != 1 {
		t.Errorf("the recovery is said %d times, want once", got)
	}
}
