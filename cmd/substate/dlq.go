package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// EventsDLQCmd is "substate events dlq": the dead letters, with their reason.
type EventsDLQCmd struct {
	Stage       string `help:"Only dead letters of this stage: ingest, normalize, project, forward, engine, reconcile, renormalize."`
	Since       string `help:"Only dead letters stored since this time (RFC 3339) or this long ago (e.g. 1h); default: all retained."`
	Follow      bool   `short:"f" help:"Keep printing new dead letters as they arrive instead of exiting after the last one."`
	OutputFlags `embed:""`
	RedactFlags `embed:""`
	ClientFlags `embed:""`

	redact func([]byte) []byte
}

// Run prints the retained dead letters, and with --follow the new ones.
func (c *EventsDLQCmd) Run(ctx context.Context, m *Main) error {
	redact, err := c.redactor()
	if err != nil {
		return err
	}
	c.redact = redact
	cfg := jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute}
	if c.Stage != "" {
		cfg.FilterSubject = substate.DLQSubject(c.Stage)
	}
	if c.Since != "" {
		t, err := parseSince(c.Since, time.Now())
		if err != nil {
			return err
		}
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := js.CreateConsumer(ctx, substate.StreamDLQ, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", substate.StreamDLQ, err)
	}
	defer func() {
		// Should the delete fail, the server removes the consumer after its
		// minute of inactivity.
		_ = js.DeleteConsumer(context.WithoutCancel(ctx), substate.StreamDLQ, cons.CachedInfo().Name)
	}()
	if !c.Follow && cons.CachedInfo().NumPending == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		} else if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if err := c.print(c.Printer(m.Stdout), msg, meta); err != nil {
			return err
		}
		if !c.Follow && meta.NumPending == 0 {
			return nil
		}
	}
}

// deadLetterJSON is the --json form of one dead letter.
type deadLetterJSON struct {
	Seq        uint64              `json:"seq"`
	Time       time.Time           `json:"time"`
	Stage      string              `json:"stage"`
	Reason     string              `json:"reason"`
	Subject    string              `json:"subject"`
	SubjectSeq string              `json:"subjectSeq,omitempty"`
	OriginalID string              `json:"originalId,omitempty"`
	Headers    map[string][]string `json:"headers"`
	// Body is the original body: as JSON when it is JSON, else as a string.
	Body any `json:"body"`
}

func (c *EventsDLQCmd) print(p *termtext.Printer, msg jetstream.Msg, meta *jetstream.MsgMetadata) error {
	h := msg.Headers()
	d := deadLetterJSON{
		Seq: meta.Sequence.Stream, Time: meta.Timestamp.UTC(), Stage: h.Get(substate.HeaderDLQStage),
		Reason: h.Get(substate.HeaderDLQReason), Subject: h.Get(substate.HeaderDLQSubject),
		SubjectSeq: h.Get(substate.HeaderDLQSeq), OriginalID: h.Get(substate.HeaderOriginalMsgID),
		Headers: h, Body: deadLetterBody(msg.Data(), c.redact),
	}
	return p.Item(d, func(bool) string {
		from := d.Subject
		if d.SubjectSeq != "" {
			from += "#" + d.SubjectSeq
		}
		return fmt.Sprintf("%s  %-9s seq=%d  %s  id=%s  %d bytes  %s",
			d.Time.Format("2006-01-02T15:04:05.000Z"), termtext.Text(d.Stage), d.Seq, termtext.Text(from), termtext.Text(termtext.Dash(d.OriginalID)), len(msg.Data()), termtext.Text(d.Reason))
	})
}

// deadLetterBody is a dead letter's body for --json: JSON as JSON, other
// bytes as a string, redacted by redact unless it is nil (a body that is
// not JSON is then hidden whole).
func deadLetterBody(data []byte, redact func([]byte) []byte) any {
	if redact != nil {
		data = redact(data)
	}
	if json.Valid(data) {
		return json.RawMessage(data)
	}
	return string(data)
}
