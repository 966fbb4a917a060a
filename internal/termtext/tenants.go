package termtext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// WriteTenants prints tenant views as a table, one tenant a row.
func WriteTenants(w io.Writer, views []substate.TenantView) error {
	t := TenantTable(views, false)
	return t.Write(w)
}

// TenantTable is tenant views as a table, one tenant a row; wide adds the
// workflow type, how long the tenant has been in its sub-state, the
// provider's state, the error type and fingerprint and the last event's
// time, and cuts less.
func TenantTable(views []substate.TenantView, wide bool) Table {
	if !wide {
		t := Table{Header: []string{"TENANT", "SUB-STATE", "VERB", "STEP", "RETRIES", "PROVIDER", "EXECUTION", "UPDATED", "ERROR"}}
		for _, v := range views {
			t.Rows = append(t.Rows, []string{Text(v.TenantID), subStateCell(&v), Dash(Text(string(v.WorkflowVerb))),
				Dash(Clip(v.WorkflowStep, 30)), strconv.Itoa(v.WorkflowRetryCount), Dash(Text(string(v.Provider))),
				Dash(Shorten(v.WorkflowExecutionID, 48)), age(v.UpdatedAt), Dash(Clip(v.WorkflowErrorMessage, 60))})
		}
		return t
	}
	t := Table{Header: []string{"TENANT", "WORKFLOW", "SUB-STATE", "SINCE", "DEADLINE", "VERB", "STEP", "RETRIES", "PROVIDER", "PROVIDER-STATE",
		"EXECUTION", "UPDATED", "LAST-EVENT", "ERROR-TYPE", "FINGERPRINT", "ERROR"}}
	for _, v := range views {
		t.Rows = append(t.Rows, []string{Text(v.TenantID), Dash(Clip(v.WorkflowType, 40)), subStateCell(&v),
			age(v.WorkflowSubStateSince), deadlineCell(&v), Dash(Text(string(v.WorkflowVerb))), Dash(Clip(v.WorkflowStep, 60)),
			strconv.Itoa(v.WorkflowRetryCount), Dash(Text(string(v.Provider))), Dash(Clip(v.ProviderState, 30)),
			Dash(Text(v.WorkflowExecutionID)), age(v.UpdatedAt), age(v.LastEventAt), Dash(Clip(v.WorkflowErrorType, 40)),
			Dash(Clip(v.WorkflowErrorFingerprint, 100)), Dash(Clip(v.WorkflowErrorMessage, 200))})
	}
	return t
}

// subStateCell is a view's sub-state, marked when the tenant is stuck.
func subStateCell(v *substate.TenantView) string {
	s := Dash(Text(string(v.WorkflowSubState)))
	if v.Stuck {
		s += " (stuck)"
	}
	return s
}

// deadlineCell says when a tenant becomes stuck, or since when it is, and
// for which SLO: "-" without a deadline.
func deadlineCell(v *substate.TenantView) string {
	switch {
	case v.Deadline.IsZero():
		return "-"
	case v.Stuck:
		return "stuck " + age(v.StuckSince) + " (" + Text(string(v.DeadlineSLO)) + ")"
	}
	return "in " + time.Until(v.Deadline).Round(time.Second).String() + " (" + Text(string(v.DeadlineSLO)) + ")"
}

// age is how long ago t was, to the second, or "-" when it is not set.
func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// WriteGroups prints a group page as a table, the largest group first,
// and a line with what the groups leave out.
func WriteGroups(w io.Writer, p substate.GroupPage) error {
	t := GroupTable(p, false)
	return t.Write(w)
}

// GroupTable is a group page as a table, the largest group first, with a
// footer line that says what the groups leave out; wide cuts less.
func GroupTable(p substate.GroupPage, wide bool) Table {
	value, sample := 90, 40
	if wide {
		value, sample = 400, 200
	}
	t := Table{Header: []string{"COUNT", "SHARE", strings.ToUpper(string(p.By)), "SAMPLE TENANT", "FIRST SEEN", "LAST SEEN"}}
	for _, g := range p.Groups {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(g.Count, 10), share(g.Count, p.Total), Clip(g.Value, value),
			Shorten(g.SampleTenantID, sample), when(g.FirstSeen), when(g.LastSeen)})
	}
	t.Footer = []string{groupSummary(p)}
	return t
}

// groupSummary says how many tenants the groups shown hold, and how many
// they leave out.
func groupSummary(p substate.GroupPage) string {
	shown := int64(0)
	for _, g := range p.Groups {
		shown += g.Count
	}
	line := fmt.Sprintf("%s match: %d in the %s above", Plural(int(p.Total), "tenant"), shown, Plural(len(p.Groups), "group"))
	if more := p.GroupCount - len(p.Groups); more > 0 {
		line += fmt.Sprintf(", %d in %d more", p.Total-p.Ungrouped-shown, more)
	}
	if p.Ungrouped > 0 {
		line += fmt.Sprintf(", %d without a %s", p.Ungrouped, p.By)
	}
	return line + scanned(p.Scanned)
}

// when is how long ago t was when that is less than two days, else t
// itself to the minute in UTC; "-" when it is not set.
func when(t time.Time) string {
	if !t.IsZero() && time.Since(t) >= 48*time.Hour {
		return t.UTC().Format("2006-01-02 15:04 UTC")
	}
	return age(t)
}

// share is n as a percentage of total.
func share(n, total int64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// scanned says how the server counted.
func scanned(n int64) string {
	if n == 0 {
		return " (counted from the view's counters)"
	}
	return fmt.Sprintf(" (counted by reading %s)", Plural(int(n), "tenant"))
}
