package termtext

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Bar is a progress bar of width cells, n of total filled.
func Bar(n, total, width int) string {
	filled := width
	if total > 0 {
		filled = min(width, n*width/total)
	}
	return "[" + strings.Repeat("█", filled) + strings.Repeat("░", width-filled) + "]"
}

// JobLine is one line of a fleet job's progress: the bar, the counts by
// outcome, the rate and the time left, and why it waits.
func JobLine(j substate.Job) string {
	p := j.Progress
	line := fmt.Sprintf("%s %d/%d  done %d · pending %d · refused %d · unknown %d · skipped %d",
		Bar(p.Outcomes(), p.Total, 24), p.Outcomes(), p.Total, p.Done, p.Pending, p.Refused, p.Unknown, p.Skipped)
	if p.Rate > 0 {
		line += fmt.Sprintf(" · %.1f/s", p.Rate)
	}
	if p.ETASeconds > 0 {
		line += " · ETA " + (time.Duration(p.ETASeconds) * time.Second).String()
	}
	if j.State != substate.JobRunning {
		line += " · " + string(j.State)
	}
	if p.Waiting != "" {
		line += " · " + Clip(p.Waiting, 80)
	}
	return line
}

// JobSummary says how a fleet job ended, in one line.
func JobSummary(j substate.Job) string {
	p := j.Progress
	s := fmt.Sprintf("job %s %s: %s of %d %s; done %d, pending %d, refused %d, unknown %d, skipped %d",
		j.ID, j.State, j.Action, p.Total, plural(p.Total, "member"), p.Done, p.Pending, p.Refused, p.Unknown, p.Skipped)
	if p.Remaining > 0 {
		s += fmt.Sprintf(", %d not acted on", p.Remaining)
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// JobTable lists fleet jobs.
func JobTable(jobs []substate.Job, wide bool) Table {
	t := Table{Header: []string{"ID", "ACTION", "STATE", "TOTAL", "DONE", "PENDING", "REFUSED", "UNKNOWN", "SKIPPED", "CREATED", "WHO"},
		Empty: "no jobs"}
	if wide {
		t.Header = append(t.Header, "FILTER", "REASON")
	}
	for _, j := range jobs {
		p := j.Progress
		row := []string{j.ID, string(j.Action), string(j.State), strconv.Itoa(j.Total), strconv.Itoa(p.Done), strconv.Itoa(p.Pending),
			strconv.Itoa(p.Refused), strconv.Itoa(p.Unknown), strconv.Itoa(p.Skipped), j.CreatedAt.UTC().Format(time.RFC3339), Text(j.Who)}
		if wide {
			row = append(row, Dash(Clip(filterText(j.Filter), 60)), Dash(Clip(j.Reason, 60)))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// JobFields shows one job, a field a row, with its reasons below.
func JobFields(j substate.Job) Table {
	t := Table{}
	row := func(k, v string) { t.Rows = append(t.Rows, []string{k, Dash(v)}) }
	row("id", j.ID)
	row("action", string(j.Action))
	row("state", string(j.State))
	row("filter", Clip(filterText(j.Filter), 200))
	row("tenant scope", j.Scope)
	row("reason", Clip(j.Reason, 200))
	row("who", Text(j.Who))
	row("created", j.CreatedAt.UTC().Format(time.RFC3339))
	row("view position", strconv.FormatUint(j.Position, 10))
	row("lanes", lanesText(j.Lanes))
	row("progress", JobLine(j))
	for _, r := range j.Reasons {
		t.Footer = append(t.Footer, fmt.Sprintf("  %d %s (%s): %s", r.Count, r.Outcome, r.Lane, Clip(r.Reason, 160)))
	}
	if len(t.Footer) > 0 {
		t.Footer = append([]string{"reasons:"}, t.Footer...)
	}
	return t
}

// filterText is a filter as name=value pairs.
func filterText(f map[string]string) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + f[k]
	}
	return strings.Join(parts, ",")
}

// lanesText is members per lane.
func lanesText(lanes map[string]int) string {
	keys := make([]string, 0, len(lanes))
	for k := range lanes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, lanes[k])
	}
	return strings.Join(parts, ", ")
}

// PreviewTable shows a dry run: the lanes, their cost and time, what
// would be refused and why, and a sample.
func PreviewTable(p substate.JobPreview, wide bool) Table {
	t := Table{Header: []string{"LANE", "MEMBERS", "WOULD ACT", "WOULD REFUSE", "API CALLS", "TIME"}, Empty: "the filter matches nothing"}
	for _, l := range p.Lanes {
		t.Rows = append(t.Rows, []string{l.Lane, strconv.Itoa(l.Members), strconv.Itoa(l.WouldAct), strconv.Itoa(l.WouldRefuse),
			callsText(l.Calls, wide), seconds(l.Seconds)})
	}
	t.Footer = append(t.Footer, fmt.Sprintf("dry run: %s would act on %d of %d (view position %d, filter %s), in %s under the lanes' limits; nothing was changed",
		p.Action, p.WouldAct, p.Total, p.Position, Dash(filterText(p.Filter)), seconds(p.Seconds)))
	for _, r := range p.Reasons {
		t.Footer = append(t.Footer, fmt.Sprintf("  would refuse %d (%s): %s", r.Count, r.Lane, Clip(r.Reason, 160)))
	}
	for _, n := range p.Notes {
		t.Footer = append(t.Footer, "  note: "+Clip(n, 200))
	}
	if len(p.Sample) > 0 {
		ids := make([]string, 0, len(p.Sample))
		for _, m := range p.Sample[:min(len(p.Sample), 5)] {
			ids = append(ids, Text(m.TenantID))
		}
		t.Footer = append(t.Footer, "  sample: "+strings.Join(ids, ", "))
	}
	return t
}

// callsText is the API calls of a lane: the calls per API, with each
// bucket when wide.
func callsText(calls []substate.APICalls, wide bool) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = fmt.Sprintf("%s %d", c.API, c.Calls)
		if wide && c.Rate > 0 {
			parts[i] += fmt.Sprintf(" (%d, %g/s)", c.Bucket, c.Rate)
		}
	}
	return Dash(strings.Join(parts, ", "))
}

// seconds is a duration in seconds, rounded for people.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return "under a second"
	}
	return "about " + d.Round(time.Second).String()
}

// OutcomeTable lists members' outcomes of a job's report.
func OutcomeTable(members []substate.MemberOutcome, wide bool) Table {
	t := Table{Header: []string{"MEMBER", "TENANT", "PROVIDER", "EXECUTION", "OUTCOME", "WHY"}, Empty: "no member has an outcome"}
	for _, m := range members {
		why := m.Error
		if why == "" {
			why = m.Detail
		}
		n := 40
		if wide {
			n = 200
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(m.Member), Text(m.TenantID), Dash(string(m.Provider)),
			Dash(Shorten(m.ExecutionID, n)), m.Outcome, Dash(Clip(why, n+20))})
	}
	return t
}
