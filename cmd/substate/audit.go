package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/replay"
)

// AuditCmd is "substate audit".
type AuditCmd struct {
	Tenant string `required:"" help:"Tenant whose history to tell."`
	Since  string `help:"Only events recorded from this time on (RFC 3339, a date, or a duration before now such as 24h)."`
	Until  string `help:"Only events recorded up to this time (same forms as --since)."`
	Raw    bool   `help:"Show the provider's own payload (from SUBSTATE_RAW, compact JSON) under each event; its execution input and output redacted unless --unredacted."`

	OutputFlags `embed:""`

	RedactFlags `embed:""`
	SourceFlags `embed:""`
}

// Run prints the tenant's transitions.
func (c *AuditCmd) Run(ctx context.Context, m *Main) error {
	q, err := c.query(time.Now())
	if err != nil {
		return err
	}
	redact, err := c.redaction(c.RedactFlags)
	if err != nil {
		return err
	}
	page, err := c.history(ctx, q)
	if err != nil {
		return err
	}
	if len(page.Transitions) == 0 && len(page.Actions) == 0 {
		return substate.Errorf(substate.ENOTFOUND, "no events of tenant %q in %s in that range", c.Tenant, substate.StreamEvents)
	}
	for i := range page.Transitions {
		if ev := page.Transitions[i].Raw; ev != nil && len(ev.Body) > 0 && redact != nil {
			ev.Body = redact(ev.Body)
		}
	}
	return printAudit(c.Printer(m.Stdout), page, c.Raw)
}

// history reads the whole history q asks for: over HTTP page by page,
// from NATS at once.
func (c *AuditCmd) history(ctx context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	if !c.overHTTP() {
		nc, js, err := c.Connect()
		if err != nil {
			return substate.HistoryPage{}, err
		}
		defer nc.Close()
		return replay.NewHistory(js).History(ctx, q)
	}
	var all substate.HistoryPage
	for {
		page, err := c.client().History(ctx, q)
		if err != nil {
			return all, err
		}
		all.TenantID, all.Transitions = page.TenantID, append(all.Transitions, page.Transitions...)
		all.Actions = append(all.Actions, page.Actions...) // each page's are those of its span
		all.ActionsCut = all.ActionsCut || page.ActionsCut
		if page.NextAfterSeq == 0 {
			return all, nil
		}
		q.AfterSeq = page.NextAfterSeq
	}
}

func (c *AuditCmd) query(now time.Time) (substate.HistoryQuery, error) {
	q := substate.HistoryQuery{TenantID: c.Tenant, Raw: c.Raw}
	var err error
	if q.Since, err = httpapi.ParseWhen("--since", c.Since, now); err != nil {
		return q, err
	}
	q.Until, err = httpapi.ParseWhen("--until", c.Until, now)
	return q, err
}

// printAudit prints the transitions and the operator actions, interleaved
// by time: as JSON lines (-o json) or YAML documents (-o yaml), one a
// transition or {"operatorAction":…}, or as a table, each transition with
// its raw evidence on the line below when raw is set, then a summary;
// wide cuts less.
func printAudit(p *termtext.Printer, page substate.HistoryPage, raw bool) error {
	items := timeline(page)
	if !p.Text() {
		for _, it := range items {
			var v any = it.tr
			if it.act != nil {
				v = actionItem{it.act}
			}
			if err := p.Item(v, nil); err != nil {
				return err
			}
		}
		return nil
	}
	t := termtext.Table{Header: []string{"SEQ", "OCCURRED", "PROVIDER", "EXECUTION", "REPORTED", "SUB-STATE", "RETRIES", "ERROR", "EFFECT"}}
	for _, it := range items {
		if it.act != nil {
			t.Rows, t.Extra = append(t.Rows, actionRow(it.act, p.Wide())), append(t.Extra, "")
			continue
		}
		tr := it.tr
		t.Rows = append(t.Rows, auditRow(tr, p.Wide()))
		extra := ""
		if raw && tr.Raw != nil {
			extra = "    " + evidenceLine(tr.Raw)
		}
		t.Extra = append(t.Extra, extra)
	}
	t.Footer = []string{auditSummary(page)}
	return t.Write(p.W)
}

func auditRow(tr *substate.Transition, wide bool) []string {
	occurred := "-"
	if !tr.OccurredAt.IsZero() {
		occurred = tr.OccurredAt.Format("2006-01-02T15:04:05.000Z")
	}
	exec, reported, msg := termtext.Shorten(tr.ExecutionID, 40), termtext.Clip(tr.ProviderState, 20), termtext.Clip(tr.New.ErrorMessage, 50)
	if wide {
		exec, reported, msg = termtext.Text(tr.ExecutionID), termtext.Text(tr.ProviderState), termtext.Clip(tr.New.ErrorMessage, 200)
	}
	return []string{
		strconv.FormatUint(tr.Seq, 10), occurred, termtext.Dash(termtext.Text(string(tr.Provider))), termtext.Dash(exec),
		termtext.Dash(reported),
		change(termtext.Text(string(tr.Old.SubState)), termtext.Text(string(tr.New.SubState))),
		change(strconv.Itoa(tr.Old.RetryCount), strconv.Itoa(tr.New.RetryCount)),
		termtext.Dash(msg), effect(tr),
	}
}

// change is "old → new", or the value alone when it did not change.
func change(old, new string) string {
	if old == new {
		return termtext.Dash(new)
	}
	return termtext.Dash(old) + " → " + termtext.Dash(new)
}

// effect says what the event did to the view, in words.
func effect(tr *substate.Transition) string {
	switch tr.Outcome {
	case substate.OutcomeChanged:
		switch {
		case tr.Old.SubState == "":
			return "changed: first event"
		case tr.NewExecution:
			return "changed: newer execution"
		case tr.Old.Step != tr.New.Step && tr.Old.SubState == tr.New.SubState:
			return "changed: step " + change(termtext.Text(tr.Old.Step), termtext.Text(tr.New.Step))
		}
		return "changed"
	case substate.OutcomeUnchanged:
		return "unchanged: nothing to write"
	case substate.OutcomeStale:
		return "stale: older than the view"
	case substate.OutcomeInvalid:
		return "invalid: " + termtext.Clip(tr.Reason, 60)
	}
	return termtext.Text(tr.Outcome)
}

func evidenceLine(e *substate.Evidence) string {
	head := "raw"
	if e.Seq > 0 {
		head += fmt.Sprintf(" #%d", e.Seq)
	}
	if e.Kind != "" {
		head += " " + string(e.Kind)
	}
	if e.ID != "" {
		head += " id=" + e.ID
	}
	if e.Missing != "" {
		return termtext.Text(head + ": (" + e.Missing + ")")
	}
	return termtext.Text(head + ": " + string(e.Body))
}

// auditSummary is the story in one line: how many events did what, and
// where the tenant ended.
func auditSummary(page substate.HistoryPage) string {
	n := map[string]int{}
	for _, tr := range page.Transitions {
		n[tr.Outcome]++
	}
	if len(page.Transitions) == 0 {
		return fmt.Sprintf("%s: %s, no events in that range", termtext.Text(page.TenantID), termtext.Plural(len(page.Actions), "operator action"))
	}
	last := page.Transitions[len(page.Transitions)-1].New
	s := fmt.Sprintf("%s: %d events: %d changed the view, %d unchanged, %d stale", termtext.Text(page.TenantID), len(page.Transitions),
		n[substate.OutcomeChanged], n[substate.OutcomeUnchanged], n[substate.OutcomeStale])
	if n[substate.OutcomeInvalid] > 0 {
		s += fmt.Sprintf(", %d invalid", n[substate.OutcomeInvalid])
	}
	s += fmt.Sprintf("; last: %s, %d retries", termtext.Dash(termtext.Text(string(last.SubState))), last.RetryCount)
	if last.ErrorMessage != "" {
		s += fmt.Sprintf(", error %q", last.ErrorMessage)
	}
	if len(page.Actions) > 0 {
		s += "; " + termtext.Plural(len(page.Actions), "operator action")
	}
	if page.ActionsCut {
		s += " (the oldest of more: narrow --since/--until for the rest)"
	}
	return s
}
