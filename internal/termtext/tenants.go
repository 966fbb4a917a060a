package termtext

import (
	"fmt"
	"io"
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
