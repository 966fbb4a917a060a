package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/worker"
)

// terminal reports whether w is a terminal: a character device, or a
// writer that says it is one (as tests do).
func terminal(w io.Writer) bool {
	if t, ok := w.(interface{ Terminal() bool }); ok {
		return t.Terminal()
	}
	f, ok := w.(*os.File)
	return ok && worker.IsTerminal(f)
}

// progress shows how a rebuild advances: on a terminal one line, rewritten
// in place at most every Every, with rate and ETA; elsewhere nothing until
// the summary.
type progress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	every time.Duration
	start time.Time
	shown time.Time
	drawn bool
}

func newProgress(w io.Writer, now func() time.Time) *progress {
	t := now()
	return &progress{w: w, tty: terminal(w), now: now, every: 100 * time.Millisecond, start: t}
}

// update redraws the line, unless it was drawn less than Every ago.
func (p *progress) update(r replay.Progress) {
	if !p.tty {
		return
	}
	now := p.now()
	if p.drawn && now.Sub(p.shown) < p.every {
		return
	}
	p.shown, p.drawn = now, true
	fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(r, now.Sub(p.start)))
}

// finish clears the line and prints the summary line.
func (p *progress) finish(summary string) {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintln(p.w, summary)
}

// elapsed is the time since the progress started.
func (p *progress) elapsed() time.Duration { return p.now().Sub(p.start) }

// progressLine is the terminal line: position, events, rate and ETA.
func progressLine(r replay.Progress, elapsed time.Duration) string {
	line := fmt.Sprintf("replaying %s: sequence %d of %d", "SUBSTATE_EVENTS", r.Seq, r.LastSeq)
	total := r.LastSeq - min(r.FirstSeq, r.LastSeq) + 1
	done := r.Seq - min(r.FirstSeq, r.Seq) + 1
	if r.LastSeq > 0 && done <= total {
		line += fmt.Sprintf(" (%d%%)", 100*done/total)
	}
	line += fmt.Sprintf(", %d events, %s", r.Events, rate(r.Events, elapsed))
	if done > 0 && done < total && elapsed > 0 {
		eta := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
		line += ", ETA " + eta.Round(time.Second).String()
	}
	return line
}

// rate is events per second over elapsed, for people.
func rate(n int, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "- events/s"
	}
	return fmt.Sprintf("%.0f events/s", float64(n)/elapsed.Seconds())
}

// plural is "1 tenant", "2 tenants".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
