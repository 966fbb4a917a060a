package consumers

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultFailureLogEvery is how often a stage logs a failure that repeats
// batch after batch: the first at once, then one line per period saying
// how many it left out.
const DefaultFailureLogEvery = 10 * time.Second

// failures follows a stage's streak of failed batches: when it began, the
// last error, and a log that says a repeating failure once per period
// rather than once per batch (a corrupt view fails every batch, dozens of
// times a second). It is safe for concurrent use: the stage writes it,
// health checks read it.
type failures struct {
	every time.Duration // 0 means DefaultFailureLogEvery
	now   func() time.Time

	mu      sync.Mutex
	since   time.Time // first failure of the streak; zero when the last batch succeeded
	last    error
	n       int       // failures in the streak
	logged  time.Time // when the streak was last logged
	skipped int       // failures since then not logged
}

// fail records a failed batch and logs it, or counts it to log later.
func (f *failures) fail(log *slog.Logger, msg string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock()
	if f.since.IsZero() {
		f.since = now
	}
	f.last, f.n = err, f.n+1
	every := f.every
	if every <= 0 {
		every = DefaultFailureLogEvery
	}
	if !f.logged.IsZero() && now.Sub(f.logged) < every {
		f.skipped++
		return
	}
	log.Error(msg, "err", err, "failing_for", now.Sub(f.since).Round(time.Millisecond), "failures", f.n, "not_logged", f.skipped)
	f.logged, f.skipped = now, 0
}

// succeed ends a streak, saying so when there was one.
func (f *failures) succeed(log *slog.Logger, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since.IsZero() {
		return
	}
	log.Info(msg, "failed_for", f.clock().Sub(f.since).Round(time.Millisecond), "failures", f.n)
	f.since, f.last, f.n, f.logged, f.skipped = time.Time{}, nil, 0, time.Time{}, 0
}

// failing returns when the current streak began and its last error, nil
// when the last batch succeeded.
func (f *failures) failing() (since time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.since, f.last
}

func (f *failures) clock() time.Time {
	if f.now != nil {
		return f.now()
	}
	return time.Now()
}
