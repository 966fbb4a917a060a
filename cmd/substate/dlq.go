package main

import (
	"context"
	"fmt"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/replay"
)

// dlqPoll is how often --follow asks for new dead letters.
const dlqPoll = time.Second

// EventsDLQCmd is "substate events dlq": the dead letters, with their reason.
type EventsDLQCmd struct {
	Stage       string `help:"Only dead letters of this stage: ingest, normalize, project, forward, engine, reconcile, renormalize."`
	Since       string `help:"Only dead letters stored since this time (RFC 3339) or this long ago (e.g. 1h); default: all retained."`
	Follow      bool   `short:"f" help:"Keep printing new dead letters as they arrive instead of exiting after the last one."`
	OutputFlags `embed:""`
	RedactFlags `embed:""`
	SourceFlags `embed:""`
}

// Run prints the retained dead letters, and with --follow the new ones.
// -o json and yaml print each with its payload: from NATS redacted
// unless --unredacted; over HTTP as the key may see it (read:raw for a
// payload, admin for it unredacted).
func (c *EventsDLQCmd) Run(ctx context.Context, m *Main) error {
	q := substate.DeadLetterQuery{Stage: c.Stage, Limit: replay.MaxDeadLetterLimit}
	if c.Since != "" {
		t, err := parseSince(c.Since, time.Now())
		if err != nil {
			return err
		}
		q.Since = t
	}
	rd, redact, done, err := c.reader()
	if err != nil {
		return err
	}
	defer done()
	p := c.Printer(m.Stdout)
	for {
		page, err := rd.DeadLetters(ctx, q)
		if err != nil {
			return err
		}
		for _, d := range page.DeadLetters {
			if err := printDeadLetter(p, d, redact); err != nil {
				return err
			}
			q.AfterSeq, q.Since = d.Seq, time.Time{}
		}
		switch {
		case page.NextAfterSeq != 0:
			q.AfterSeq, q.Since = page.NextAfterSeq, time.Time{}
		case !c.Follow:
			return nil
		case timex.Sleep(ctx, dlqPoll) != nil:
			return nil
		}
	}
}

// reader returns what reads the dead letters, over HTTP or NATS; how to
// redact a payload read from NATS (nil: as it is); what to call when done.
func (c *EventsDLQCmd) reader() (substate.DeadLetterReader, func([]byte) []byte, func(), error) {
	redact, err := c.redaction(c.RedactFlags)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.overHTTP() {
		return c.client(), nil, func() {}, nil
	}
	nc, js, err := c.Connect()
	if err != nil {
		return nil, nil, nil, err
	}
	return replay.DeadLetters{Reader: &replay.Reader{JS: js}}, redact, nc.Close, nil
}

// printDeadLetter prints one dead letter: a line, or with -o json and
// yaml the whole record, its payload redacted by redact when not nil.
func printDeadLetter(p *termtext.Printer, d substate.StoredDeadLetter, redact func([]byte) []byte) error {
	if redact != nil && d.Payload != nil {
		d.Payload, d.Redacted = redact(d.Payload), true
	}
	return p.Item(d, func(bool) string {
		from := d.Subject
		if d.SubjectSeq != 0 {
			from += fmt.Sprintf("#%d", d.SubjectSeq)
		}
		return fmt.Sprintf("%s  %-9s seq=%d  %s  id=%s  %d bytes  %s",
			d.Time.Format("2006-01-02T15:04:05.000Z"), termtext.Text(d.Stage), d.Seq, termtext.Text(from), termtext.Text(termtext.Dash(d.OriginalID)), d.Size, termtext.Text(d.Reason))
	})
}
