package termtext

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Terminal reports whether w is a terminal: a character device, or a
// writer that says it is one (as tests do).
func Terminal(w io.Writer) bool {
	if t, ok := w.(interface{ Terminal() bool }); ok {
		return t.Terminal()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Position is how far a replay of a stream is: the sequences it reads
// (as far as known at its start), the last one read, and the events
// applied so far.
type Position struct {
	FirstSeq, LastSeq, Seq uint64
	Events                 int
}

// Progress shows how a replay advances: on a terminal one line, rewritten
// in place at most every 100ms, with rate and ETA; elsewhere nothing until
// the summary.
type Progress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	every time.Duration
	start time.Time
	shown time.Time
	drawn bool
}

// NewProgress starts a progress on w, with now as its clock.
func NewProgress(w io.Writer, now func() time.Time) *Progress {
	t := now()
	return &Progress{w: w, tty: Terminal(w), now: now, every: 100 * time.Millisecond, start: t}
}

// Update redraws the line, unless it was drawn less than 100ms ago.
func (p *Progress) Update(r Position) {
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

// Finish clears the line and prints the summary line.
func (p *Progress) Finish(summary string) {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintln(p.w, summary)
}

// Elapsed is the time since the progress started.
func (p *Progress) Elapsed() time.Duration { return p.now().Sub(p.start) }

// Drawn reports whether a progress line was drawn.
func (p *Progress) Drawn() bool { return p.drawn }

// progressLine is the terminal line: position, events, rate and ETA.
func progressLine(r Position, elapsed time.Duration) string {
	line := fmt.Sprintf("replaying %s: sequence %d of %d", "SUBSTATE_EVENTS", r.Seq, r.LastSeq)
	total := r.LastSeq - min(r.FirstSeq, r.LastSeq) + 1
	done := r.Seq - min(r.FirstSeq, r.Seq) + 1
	if r.LastSeq > 0 && done <= total {
		line += fmt.Sprintf(" (%d%%)", 100*done/total)
	}
	line += fmt.Sprintf(", %d events, %s", r.Events, Rate(r.Events, elapsed))
	if done > 0 && done < total && elapsed > 0 {
		eta := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
		line += ", ETA " + eta.Round(time.Second).String()
	}
	return line
}

// Rate is events per second over elapsed, for people.
func Rate(n int, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "- events/s"
	}
	return fmt.Sprintf("%.0f events/s", float64(n)/elapsed.Seconds())
}
