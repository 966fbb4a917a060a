package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/replay"
)

// RebuildCmd is "substate rebuild".
type RebuildCmd struct {
	Out       string `required:"" type:"path" placeholder:"FILE" help:"View file to write; it is built as FILE.tmp and renamed into place when complete."`
	Until     string `xor:"until" help:"The view as of this time (RFC 3339, a date, or a duration before now): events recorded later are left out."`
	UntilSeq  uint64 `xor:"until" help:"The view as of this SUBSTATE_EVENTS sequence."`
	Force     bool   `help:"Replace FILE when it exists (never the view of a running worker: stop it first)."`
	BatchSize int    `default:"512" help:"Events per view transaction."`

	ClientFlags `embed:""`
}

// Run rebuilds the view file.
func (c *RebuildCmd) Run(ctx context.Context, m *Main) error {
	rg, err := c.rangeAt(time.Now())
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.Out); err == nil && !c.Force {
		return substate.Errorf(substate.EEXISTS, "%s exists: choose another file or pass --force", c.Out)
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	prog := termtext.NewProgress(m.Stderr, time.Now)
	p, tenants, err := replay.RebuildFile(ctx, js, c.Out, rg, c.BatchSize, showProgress(prog))
	if err != nil {
		return err
	}
	prog.Finish(rebuildSummary(c.Out, p, tenants, prog.Elapsed()))
	return nil
}

func (c *RebuildCmd) rangeAt(now time.Time) (replay.Range, error) {
	until, err := httpapi.ParseWhen("--until", c.Until, now)
	return replay.Range{Until: until, ToSeq: c.UntilSeq}, err
}

func rebuildSummary(file string, p replay.Progress, tenants int, elapsed time.Duration) string {
	s := fmt.Sprintf("rebuilt %s: %s", file, termtext.Plural(p.Events, "event"))
	if p.Events > 0 {
		s += fmt.Sprintf(" (sequences %d to %d)", p.FirstSeq, p.Seq)
	}
	s += fmt.Sprintf(", %s, %s, %d unchanged, %d stale", termtext.Plural(tenants, "tenant"), termtext.Plural(p.Changes, "change"), p.Unchanged, p.Stale)
	if p.Invalid > 0 {
		s += fmt.Sprintf(", %d invalid messages left out", p.Invalid)
	}
	return s + fmt.Sprintf(" in %s (%s)", elapsed.Round(time.Millisecond), termtext.Rate(p.Events, elapsed))
}

// showProgress draws a replay's progress on prog.
func showProgress(prog *termtext.Progress) func(replay.Progress) {
	return func(p replay.Progress) {
		prog.Update(termtext.Position{FirstSeq: p.FirstSeq, LastSeq: p.LastSeq, Seq: p.Seq, Events: p.Events})
	}
}
