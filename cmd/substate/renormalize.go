package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// RenormalizeCmd is "substate renormalize".
type RenormalizeCmd struct {
	Since      string   `help:"Only raw messages recorded from this time on (RFC 3339, a date, or a duration before now); default: all that SUBSTATE_RAW retains."`
	Until      string   `help:"Only raw messages recorded up to this time (same forms as --since)."`
	DryRun     bool     `help:"Map and count, publish nothing."`
	TenantRule []string `sep:"none" placeholder:"RULE" help:"Tenant resolution rules, as the worker's --tenant-rule (use the same ones)."`

	ClientFlags `embed:""`
}

// Run maps the raw stream again and publishes the events that are missing.
func (c *RenormalizeCmd) Run(ctx context.Context, m *Main) error {
	now := time.Now()
	since, err := httpapi.ParseWhen("--since", c.Since, now)
	if err != nil {
		return err
	}
	until, err := httpapi.ParseWhen("--until", c.Until, now)
	if err != nil {
		return err
	}
	rules, err := mapping.ParseTenantRules(c.TenantRule...)
	if err != nil {
		return err
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	r := &replay.Renormalizer{
		Reader: &replay.Reader{JS: js}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, Events: publishers.NewJetStream(js), DryRun: c.DryRun,
	}
	res, err := r.Run(ctx, replay.Range{Since: since, Until: until})
	if err != nil {
		return err
	}
	printRenormalize(m.Stdout, res, c.DryRun)
	return nil
}

func printRenormalize(w io.Writer, res replay.RenormalizeResult, dryRun bool) {
	if res.Raw == 0 {
		fmt.Fprintln(w, "no raw messages in that range")
		return
	}
	verb := "published"
	if dryRun {
		verb = "would publish"
	}
	fmt.Fprintf(w, "renormalized %d raw messages (sequences %d to %d) with mapping version %d: %d events, %d already in the events stream, %s %d\n",
		res.Raw, res.FirstSeq, res.LastSeq, mapping.Version, res.Mapped, res.Present, verb, res.Published)
	if res.Rejected > 0 {
		fmt.Fprintf(w, "%d raw messages rejected by the mapping (the worker dead-lettered them too); first: %s\n", res.Rejected, termtext.Text(res.FirstRejection))
	}
}
