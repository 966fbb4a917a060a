package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/replay"
)

// EventsCmd is "substate events".
type EventsCmd struct {
	Tail EventsTailCmd `cmd:"" help:"Print canonical events as they arrive on SUBSTATE_EVENTS."`
	DLQ  EventsDLQCmd  `cmd:"" name:"dlq" help:"Print the dead letters kept in SUBSTATE_DLQ: what could not be processed, and why."`
}

// EventsTailCmd is "substate events tail".
type EventsTailCmd struct {
	Tenant      string        `help:"Only this tenant's events."`
	Since       string        `help:"Start from this time (RFC 3339) or this long ago (e.g. 1h); default: new events only."`
	FromStart   bool          `help:"Start from the oldest retained event."`
	Count       int           `help:"Exit after this many events (0 = run until interrupted)."`
	IdleTimeout time.Duration `help:"Exit when no event arrives for this long (0 = never)."`
	OutputFlags `embed:""`
	SourceFlags `embed:""`
}

// Run prints events until interrupted, Count events, or the idle timeout.
func (c *EventsTailCmd) Run(ctx context.Context, m *Main) error {
	q := substate.EventStreamQuery{TenantID: c.Tenant, FromStart: c.FromStart}
	if c.Since != "" {
		t, err := parseSince(c.Since, time.Now())
		if err != nil {
			return err
		}
		q.Since = t
	}
	feed, done, err := c.feed()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var idle *time.Timer
	if c.IdleTimeout > 0 {
		idle = time.AfterFunc(c.IdleTimeout, cancel)
		defer idle.Stop()
	}
	p, n := c.Printer(m.Stdout), 0
	for e, err := range feed.FollowEvents(ctx, q) {
		if err != nil {
			return err
		}
		if err := printEvent(p, e); err != nil {
			return err
		}
		if n++; c.Count > 0 && n >= c.Count {
			return nil
		}
		if idle != nil {
			idle.Reset(c.IdleTimeout)
		}
	}
	return nil
}

// feed returns what follows SUBSTATE_EVENTS, over HTTP or NATS, and what
// to call when done with it.
func (c *EventsTailCmd) feed() (substate.EventFollower, func(), error) {
	if c.overHTTP() {
		return c.client(), func() {}, nil
	}
	nc, js, err := c.Connect()
	if err != nil {
		return nil, nil, err
	}
	return replay.NewEventFeed(&replay.Reader{JS: js}), nc.Close, nil
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

// printEvent prints one message of SUBSTATE_EVENTS: the CloudEvent as
// stored for -o json and yaml, else a line (wide: with more fields).
func printEvent(p *termtext.Printer, e substate.StoredEvent) error {
	if !p.Text() {
		if !json.Valid(e.Data) {
			return p.Item(string(e.Data), nil)
		}
		return p.Item(json.RawMessage(e.Data), nil)
	}
	ev, err := substate.UnmarshalEvent(e.Data)
	if err != nil {
		return p.Item(nil, func(bool) string {
			return termtext.Text(fmt.Sprintf("undecodable event at sequence %d: %v", e.Seq, err))
		})
	}
	return p.Item(nil, func(wide bool) string { return eventLine(&ev.Data, wide) })
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
