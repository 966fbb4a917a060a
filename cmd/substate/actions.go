package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/internal/timex"
)

// ActionsCmd is "substate actions": the fleet jobs of a running worker.
type ActionsCmd struct {
	List   ActionsListCmd   `cmd:"" help:"List the fleet jobs, newest first."`
	Get    ActionsGetCmd    `cmd:"" help:"Show a fleet job: its state, progress and the reasons of members not done."`
	Watch  ActionsWatchCmd  `cmd:"" help:"Follow a fleet job's progress until it ends (a progress bar on a terminal). Exit status 0 once it is done, 3 when members are still pending, 1 when it was cancelled."`
	Report ActionsReportCmd `cmd:"" help:"List a fleet job's members' outcomes, as SUBSTATE_AUDIT holds them."`
	Pause  ActionsPauseCmd  `cmd:"" help:"Pause a fleet job: no member is acted on until it is resumed (the actions under way end)."`
	Resume ActionsResumeCmd `cmd:"" help:"Resume a paused fleet job."`
	Cancel ActionsCancelCmd `cmd:"" help:"Cancel a fleet job: no member is acted on from now (the actions under way end and are recorded); the report says what was done."`
}

// JobFlags say which worker to ask, with an admin key.
type JobFlags struct {
	Server      string `default:"http://127.0.0.1:8080" help:"Base URL of a running substate worker."`
	APIKey      string `name:"api-key" help:"API key with the admin scope, sent as Authorization: Bearer (needed once the worker has keys)."`
	OutputFlags `embed:""`
}

// Client is the API client of the worker the flags name.
func (f JobFlags) Client() *httpapi.Client { return &httpapi.Client{URL: f.Server, APIKey: f.APIKey} }

// ActionsListCmd is "substate actions list".
type ActionsListCmd struct {
	Limit    int `default:"50" help:"Jobs to list, newest first (at most 500)."`
	JobFlags `embed:""`
}

// Run lists the jobs.
func (c *ActionsListCmd) Run(ctx context.Context, m *Main) error {
	jobs, err := c.Client().Jobs(ctx, c.Limit)
	if err != nil {
		return err
	}
	return c.Printer(m.Stdout).PrintTable(map[string]any{"jobs": jobs}, func(wide bool) termtext.Table { return termtext.JobTable(jobs, wide) })
}

// JobArg is the job a command is about.
type JobArg struct {
	ID string `arg:"" help:"Job id (job-…), as POST /v1/actions and actions list give it."`
}

// ActionsGetCmd is "substate actions get ID".
type ActionsGetCmd struct {
	JobArg   `embed:""`
	JobFlags `embed:""`
}

// Run shows the job.
func (c *ActionsGetCmd) Run(ctx context.Context, m *Main) error {
	j, err := c.Client().Job(ctx, c.ID)
	if err != nil {
		return err
	}
	return c.Printer(m.Stdout).PrintTable(j, func(bool) termtext.Table { return termtext.JobFields(j) })
}

// ActionsWatchCmd is "substate actions watch ID".
type ActionsWatchCmd struct {
	JobArg   `embed:""`
	JobFlags `embed:""`
}

// Run follows the job to its end.
func (c *ActionsWatchCmd) Run(ctx context.Context, m *Main) error {
	return watchJob(ctx, m, c.Client(), c.Printer(m.Stdout), c.ID)
}

// ActionsReportCmd is "substate actions report ID".
type ActionsReportCmd struct {
	JobArg   `embed:""`
	Outcome  string `enum:",done,pending,refused,unknown,skipped" default:"" help:"Only the members with this outcome (done, pending, refused, unknown, skipped)."`
	JobFlags `embed:""`
}

// Run prints every page of the report.
func (c *ActionsReportCmd) Run(ctx context.Context, m *Main) error {
	p := c.Printer(m.Stdout)
	q := substate.JobReportQuery{Outcome: c.Outcome, Limit: 1000}
	var all []substate.MemberOutcome
	for {
		rep, err := c.Client().JobReport(ctx, c.ID, q)
		if err != nil {
			return err
		}
		all = append(all, rep.Members...)
		if rep.NextAfter == 0 {
			break
		}
		q.After = rep.NextAfter
	}
	return p.PrintTable(map[string]any{"members": all}, func(wide bool) termtext.Table { return termtext.OutcomeTable(all, wide) })
}

// ActionsPauseCmd is "substate actions pause ID".
type ActionsPauseCmd struct {
	JobArg   `embed:""`
	JobFlags `embed:""`
}

// Run pauses the job.
func (c *ActionsPauseCmd) Run(ctx context.Context, m *Main) error {
	return control(ctx, m, c.JobFlags, c.ID, substate.JobPause)
}

// ActionsResumeCmd is "substate actions resume ID".
type ActionsResumeCmd struct {
	JobArg   `embed:""`
	JobFlags `embed:""`
}

// Run resumes the job.
func (c *ActionsResumeCmd) Run(ctx context.Context, m *Main) error {
	return control(ctx, m, c.JobFlags, c.ID, substate.JobResume)
}

// ActionsCancelCmd is "substate actions cancel ID".
type ActionsCancelCmd struct {
	JobArg   `embed:""`
	JobFlags `embed:""`
}

// Run cancels the job.
func (c *ActionsCancelCmd) Run(ctx context.Context, m *Main) error {
	return control(ctx, m, c.JobFlags, c.ID, substate.JobCancel)
}

// control asks for op on a job and prints the job.
func control(ctx context.Context, m *Main, f JobFlags, id string, op substate.JobOp) error {
	j, err := f.Client().ControlJob(ctx, id, op)
	if err != nil {
		return err
	}
	return f.Printer(m.Stdout).Print(j, func(w io.Writer, _ bool) error {
		_, err := fmt.Fprintf(w, "job %s: %s asked; %s\n", j.ID, op, termtext.JobLine(j))
		return err
	})
}

// watchJob follows a job until it ends: a progress bar redrawn in place on
// a terminal, a line every watchLineEvery elsewhere (nothing with -o json
// or yaml), then its summary or the final job. The exit status says how
// it ended: 0 done, ExitPending with members pending, 1 cancelled.
func watchJob(ctx context.Context, m *Main, client *httpapi.Client, p *termtext.Printer, id string) error {
	var last substate.Job
	bar := newJobBar(m.Stderr, p.Text())
	err := followJob(ctx, m.Stderr, client, id, func(j substate.Job) {
		last = j
		bar.update(j)
	})
	bar.clear()
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(m.Stderr, "stopped watching; the job goes on: substate actions watch %s (or cancel %s)\n", id, id)
		return ctx.Err()
	case err != nil:
		return err
	}
	if err := p.Print(last, func(w io.Writer, _ bool) error {
		_, err := fmt.Fprintln(w, termtext.JobSummary(last))
		return err
	}); err != nil {
		return err
	}
	switch {
	case last.State == substate.JobCancelled:
		return exitError{1}
	case last.Progress.Pending > 0:
		return exitError{ExitPending}
	}
	return nil
}

// ReconnectFor is how long a command following a job keeps trying to
// reach a worker that went away (restarted, killed) before it gives up.
const ReconnectFor = 3 * time.Minute

// followJob calls fn with the job at every event of its stream until it
// ends; when the stream breaks or the worker cannot be reached, it says so
// once on w and connects again, every second for up to ReconnectFor since
// it last heard from the worker. A refusal (an unknown job, a key without
// the right) ends it at once.
func followJob(ctx context.Context, w io.Writer, client *httpapi.Client, id string, fn func(substate.Job)) error {
	heard, told := time.Now(), false
	for {
		err := client.WatchJob(ctx, id, func(j substate.Job) {
			heard, told = time.Now(), false
			fn(j)
		})
		code := substate.ErrorCode(err)
		switch {
		case err == nil, ctx.Err() != nil, code != substate.EUNAVAILABLE && code != substate.EINTERNAL:
			return err
		case time.Since(heard) > ReconnectFor:
			return fmt.Errorf("%w (gave up reconnecting after %s)", err, ReconnectFor)
		case !told:
			fmt.Fprintf(w, "\nthe worker went away (%s); the job goes on there: reconnecting\n", termtext.Clip(err.Error(), 160))
			told = true
		}
		if err := timex.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// watchLineEvery is how often a job's progress is printed where it cannot
// be redrawn in place.
const watchLineEvery = 10 * time.Second

// jobBar draws a job's progress on w: in place on a terminal, a line at
// a time elsewhere.
type jobBar struct {
	w     io.Writer
	tty   bool
	on    bool
	drawn bool
	shown time.Time
}

func newJobBar(w io.Writer, on bool) *jobBar {
	return &jobBar{w: w, tty: termtext.Terminal(w), on: on}
}

func (b *jobBar) update(j substate.Job) {
	switch {
	case !b.on || j.State.Final():
	case b.tty:
		fmt.Fprintf(b.w, "\r%s\x1b[K", termtext.JobLine(j))
		b.drawn = true
	case time.Since(b.shown) >= watchLineEvery:
		fmt.Fprintln(b.w, termtext.JobLine(j))
		b.shown = time.Now()
	}
}

func (b *jobBar) clear() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
}

// fleetFields are the names a --filter may give.
var fleetFields = append(slices.Clone(httpapi.JobTenantFields), httpapi.JobDeadLetterFields...)

// freeText are the filter fields whose values may hold commas: a comma
// there ends the value only before another known field.
var freeText = []string{"fingerprint", "step", "workflowType", "reason"}

// pairStart matches the "name=" a pair of a --filter starts with.
var pairStart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*=`)

// ParseFilter reads --filter values: name=value pairs separated by
// commas (subState=failed,fingerprint=…), from one flag or several. The
// value is everything after the first "=", so it may hold "=". A comma
// inside a fingerprint, step, workflowType or reason stays in the value
// unless a known field and "=" follow it; there is no quoting, so such a
// value that holds ",provider=" (say) can only be given through POST
// /v1/actions. Any other value ends at the next comma, and what follows
// must be a pair; empty pieces (a trailing comma) are ignored. A field
// given twice, or with an empty value (which would select any tenant, as
// an unset shell variable does), is an EINVALID error. The server checks
// the names and values and names any it does not know.
func ParseFilter(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		key := ""
		for _, part := range strings.Split(v, ",") {
			name, value, _ := strings.Cut(part, "=")
			free := slices.Contains(freeText, key)
			switch {
			case pairStart.MatchString(part) && (!free || slices.Contains(fleetFields, name)):
				if _, dup := out[name]; dup {
					return nil, substate.Errorf(substate.EINVALID, "--filter: %s given twice", name)
				}
				key, out[name] = name, value
			case free:
				out[key] += "," + part
			case part == "":
			case key != "":
				return nil, substate.Errorf(substate.EINVALID, "--filter %q: %q after %s=%s is not name=value (only a fingerprint, step, workflowType or reason may hold commas)",
					v, part, key, out[key])
			default:
				return nil, substate.Errorf(substate.EINVALID, "--filter %q: want name=value pairs separated by commas, such as subState=failed,provider=stepfunctions", v)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(out)) {
		if out[k] == "" {
			return nil, substate.Errorf(substate.EINVALID, "--filter: %s= has no value; leave the field out to select any", k)
		}
	}
	return out, nil
}

// errNoTarget is the error of an action given neither a tenant nor a
// filter.
var errNoTarget = errors.New("give a tenant, or --filter to act on every tenant it selects")

// fleet runs the action on every tenant the filter selects: a dry run's
// preview, or a job followed to its end (or, detached, just created).
func (c *ExecutionActFlags) fleet(ctx context.Context, m *Main, action substate.ExecutionAction, kill bool) error {
	filter, err := ParseFilter(c.Filter)
	if err != nil {
		return err
	}
	client, p := c.Client(), c.Printer(m.Stdout)
	req := substate.JobRequest{Action: action, Filter: filter, Reason: c.Reason, Kill: kill}
	if c.DryRun {
		pv, err := client.PreviewJob(ctx, req)
		if err != nil {
			return dryRunError(err)
		}
		return p.PrintTable(pv, func(wide bool) termtext.Table { return termtext.PreviewTable(pv, wide) })
	}
	if c.Expect >= 0 {
		req.ExpectedCount = &c.Expect
	}
	j, err := client.CreateJob(ctx, req)
	if err != nil {
		return err
	}
	if c.Detach {
		return p.PrintTable(j, func(bool) termtext.Table { return termtext.JobFields(j) })
	}
	if p.Text() {
		fmt.Fprintf(m.Stderr, "job %s: %s of %d tenants frozen at view position %d; following it (Ctrl-C stops following, not the job)\n", j.ID, action, j.Total, j.Position)
	}
	return watchJob(ctx, m, client, p, j.ID)
}

// dryRunError says, of a dry run cut off by the worker going away, that
// nothing was done.
func dryRunError(err error) error {
	if substate.ErrorCode(err) == substate.EINTERNAL && strings.Contains(err.Error(), "ask the worker") {
		return fmt.Errorf("%w; a dry run changes nothing, so nothing was done: run it again once the worker is up", err)
	}
	return err
}
