package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// EventsCmd is "substate events".
type EventsCmd struct {
	Tail EventsTailCmd `cmd:"" help:"Print canonical events as they arrive on SUBSTATE_EVENTS."`
	DLQ  EventsDLQCmd  `cmd:"" name:"dlq" help:"Print the dead letters kept in SUBSTATE_DLQ: what could not be processed, and why."`
}

// EventsTailCmd is "substate events tail".
type EventsTailCmd struct {
	Tenant      string `help:"Only this tenant's events."`
	Since       string `help:"Start from this time (RFC 3339) or this long ago (e.g. 1h); default: new events only."`
	FromStart   bool   `help:"Start from the oldest retained event."`
	Count       int    `help:"Exit after this many events (0 = run until interrupted)."`
	OutputFlags `embed:""`
	IdleTimeout time.Duration `help:"Exit when no event arrives for this long (0 = never)."`
	ClientFlags `embed:""`
}

// Run prints events until interrupted, Count events, or the idle timeout.
func (c *EventsTailCmd) Run(ctx context.Context, m *Main) error {
	cfg, err := c.consumerConfig(time.Now())
	if err != nil {
		return err
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := js.OrderedConsumer(ctx, substate.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", substate.StreamEvents, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer deleteConsumer(js, substate.StreamEvents, cons)
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	return c.print(c.Printer(m.Stdout), it)
}

// tailInactive is how long the server keeps the consumer of a tail whose
// process died without deleting it.
const tailInactive = 30 * time.Second

// deleteConsumer deletes the consumer a command read with, once it is done
// or interrupted: the server keeps a consumer per reader, and a stream
// holds only so many.
func deleteConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name)
}

func (c *EventsTailCmd) print(p *termtext.Printer, it jetstream.MessagesContext) error {
	for n := 0; c.Count == 0 || n < c.Count; n++ {
		var opts []jetstream.NextOpt
		if c.IdleTimeout > 0 {
			opts = append(opts, jetstream.NextMaxWait(c.IdleTimeout))
		}
		msg, err := it.Next(opts...)
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		} else if errors.Is(err, nats.ErrTimeout) {
			return nil
		} else if err != nil {
			return err
		}
		if err := printEvent(p, msg.Subject(), msg.Data()); err != nil {
			return err
		}
	}
	return nil
}

// printEvent prints one message of SUBSTATE_EVENTS: the CloudEvent as
// stored for -o json and yaml, else a line (wide: with more fields).
func printEvent(p *termtext.Printer, subject string, data []byte) error {
	if !p.Text() {
		if !json.Valid(data) {
			return p.Item(string(data), nil)
		}
		return p.Item(json.RawMessage(data), nil)
	}
	e, err := substate.UnmarshalEvent(data)
	if err != nil {
		return p.Item(nil, func(bool) string { return termtext.Text(fmt.Sprintf("undecodable event on %s: %v", subject, err)) })
	}
	return p.Item(nil, func(wide bool) string { return eventLine(&e.Data, wide) })
}

func (c *EventsTailCmd) consumerConfig(now time.Time) (jetstream.OrderedConsumerConfig, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy, InactiveThreshold: tailInactive}
	if c.Tenant != "" {
		cfg.FilterSubjects = []string{substate.EventsSubject(c.Tenant)}
	}
	switch {
	case c.FromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case c.Since != "":
		t, err := parseSince(c.Since, now)
		if err != nil {
			return cfg, err
		}
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	return cfg, nil
}

// parseSince reads an RFC 3339 time or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, substate.Errorf(substate.EINVALID, "--since %q: want an RFC 3339 time or a duration like 1h", s)
	}
	return t, nil
}

// eventLine is one readable line per canonical event; wide adds the
// workflow, the step, the provider's state and the error type, and does
// not cut the execution id.
func eventLine(d *substate.EventData, wide bool) string {
	var b strings.Builder
	exec := termtext.Shorten(d.ExecutionID, 60)
	if wide {
		exec = termtext.Text(d.ExecutionID)
	}
	fmt.Fprintf(&b, "%s  %-20s %-12s %-10s %-13s retries=%d exec=%s",
		d.OccurredAt.UTC().Format("2006-01-02T15:04:05.000Z"), termtext.Text(d.TenantID), termtext.Text(string(d.SubState)), termtext.Text(string(d.Verb)),
		termtext.Text(string(d.Provider)), d.RetryCount, exec)
	if wide {
		for _, kv := range [][2]string{{"workflow", d.Workflow}, {"step", d.Step}, {"state", d.ProviderState}, {"errorType", d.ErrorType}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%s", kv[0], termtext.Text(kv[1]))
			}
		}
	}
	if d.ErrorMessage != "" {
		fmt.Fprintf(&b, " error=%s", termtext.Text(strconv.Quote(d.ErrorMessage)))
	}
	return b.String()
}
