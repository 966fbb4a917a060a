package main

import (
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// timelineItem is one line of a tenant's timeline: a transition, or an
// operator action.
type timelineItem struct {
	tr  *substate.Transition
	act *substate.AuditEvent
}

// timeline interleaves a page's transitions and operator actions by time,
// a transition first at the same time.
func timeline(page substate.HistoryPage) []timelineItem {
	out := make([]timelineItem, 0, len(page.Transitions)+len(page.Actions))
	i, j := 0, 0
	for i < len(page.Transitions) || j < len(page.Actions) {
		if j == len(page.Actions) || (i < len(page.Transitions) && !page.Transitions[i].StoredAt.After(page.Actions[j].Time)) {
			out = append(out, timelineItem{tr: &page.Transitions[i]})
			i++
			continue
		}
		out = append(out, timelineItem{act: &page.Actions[j]})
		j++
	}
	return out
}

// actionItem is an operator action as a JSON line or YAML document of
// "substate audit": {"operatorAction":{…}}, told apart from transitions.
type actionItem struct {
	OperatorAction *substate.AuditEvent `json:"operatorAction"`
}

// actionRow is an operator action as a row of the audit table: who did
// what, why, and how it ended.
func actionRow(ev *substate.AuditEvent, wide bool) []string {
	n := 50
	if wide {
		n = 200
	}
	what := string(ev.Action) + " by " + ev.Who
	if ev.Job != "" {
		what += " (job " + ev.Job + ")"
	}
	why := ev.Reason
	if ev.Error != "" || ev.Detail != "" {
		why = strings.TrimSpace(why + " → " + ev.Error + " " + ev.Detail)
	}
	return []string{"action", ev.Time.UTC().Format("2006-01-02T15:04:05.000Z"), termtext.Dash(termtext.Text(string(ev.Provider))),
		termtext.Dash(termtext.Shorten(ev.ExecutionID, 40)), "-", termtext.Clip(what, n), "-", termtext.Dash(termtext.Clip(why, n)),
		"operator: " + ev.Outcome}
}
