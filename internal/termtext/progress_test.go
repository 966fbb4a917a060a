package termtext

import (
	"bytes"
	"testing"
	"time"
)

// ttyBuffer is an output that says it is a terminal.
type ttyBuffer struct{ bytes.Buffer }

func (*ttyBuffer) Terminal() bool { return true }

func TestProgressLine(t *testing.T) {
	now := time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)
	var tty ttyBuffer
	p := NewProgress(&tty, func() time.Time { return now })
	now = now.Add(2 * time.Second)
	p.Update(Position{FirstSeq: 1, LastSeq: 1000, Seq: 250, Events: 250})
	now = now.Add(10 * time.Millisecond)
	p.Update(Position{FirstSeq: 1, LastSeq: 1000, Seq: 260, Events: 260}) // too soon: not drawn
	now = now.Add(2 * time.Second)
	p.Update(Position{FirstSeq: 1, LastSeq: 1000, Seq: 500, Events: 500})
	p.Finish("done")
	want := "\rreplaying SUBSTATE_EVENTS: sequence 250 of 1000 (25%), 250 events, 125 events/s, ETA 6s\x1b[K" +
		"\rreplaying SUBSTATE_EVENTS: sequence 500 of 1000 (50%), 500 events, 125 events/s, ETA 4s\x1b[K" +
		"\r\x1b[Kdone\n"
	if got := tty.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	var plain bytes.Buffer
	p = NewProgress(&plain, func() time.Time { return now })
	p.Update(Position{LastSeq: 10, Seq: 5})
	p.Finish("done")
	if got := plain.String(); got != "done\n" {
		t.Errorf("not a terminal: %q", got)
	}
}
