package termtext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/substatehq/substate"
)

// WriteTenants prints tenant views as a table, one tenant a row.
func WriteTenants(w io.Writer, views []substate.TenantView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSUB-STATE\tVERB\tSTEP\tRETRIES\tPROVIDER\tEXECUTION\tUPDATED\tERROR")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", Text(v.TenantID), Dash(Text(string(v.WorkflowSubState))),
			Dash(Text(string(v.WorkflowVerb))), Dash(Clip(v.WorkflowStep, 30)), v.WorkflowRetryCount, Dash(Text(string(v.Provider))),
			Dash(Shorten(v.WorkflowExecutionID, 48)), age(v.UpdatedAt), Dash(Clip(v.WorkflowErrorMessage, 60)))
	}
	return tw.Flush()
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
	t := Table{Header: []string{"COUNT", "SHARE", strings.ToUpper(string(p.By)), "SAMPLE TENANT", "FIRST SEEN", "LAST SEEN"}}
	for _, g := range p.Groups {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(g.Count, 10), share(g.Count, p.Total), Clip(g.Value, 90),
			Shorten(g.SampleTenantID, 40), when(g.FirstSeen), when(g.LastSeen)})
		t.Extra = append(t.Extra, "")
	}
	if err := t.Write(w); err != nil {
		return err
	}
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
	_, err := fmt.Fprintf(w, "%s%s\n", line, scanned(p.Scanned))
	return err
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
