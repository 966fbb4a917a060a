package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
)

// VerifyCmd is "substate verify".
type VerifyCmd struct {
	Server           string   `default:"http://127.0.0.1:8080" help:"Base URL of the running worker whose view to verify."`
	APIKey           string   `name:"api-key" help:"Read-API key of the worker, sent as Authorization: Bearer (one for every tenant: no tenant prefix)."`
	BatchSize        int      `default:"512" help:"Events per transaction of the replay."`
	Evidence         bool     `default:"true" negatable:"" help:"Also check each canonical event against its raw evidence in SUBSTATE_RAW: an event that no raw message maps to (forged, or its evidence gone) fails the check."`
	TenantRule       []string `sep:"none" help:"The worker's tenant resolution rules (its --tenant-rule), to map the raw evidence as it does." placeholder:"RULE"`
	AcceptUnverified bool     `help:"Do not fail on events of another mapping version, which this binary cannot derive again exactly, when the current mapping of their raw message agrees on tenant, execution and sub-state (they are still listed as unverified)."`
	ViewFile         string   `help:"Check this view file (a stopped worker's <data-dir>/view.db) with bbolt's consistency check instead of comparing a running worker's view with the stream; a running worker checks its file when it opens it and reports a corrupt page on /readyz." type:"path" placeholder:"FILE"`

	ClientFlags `embed:""`
}

// Run rebuilds the view into a temporary file up to the live view's
// position and compares the two (replay.Verify); any difference is exit
// status 1.
func (c *VerifyCmd) Run(ctx context.Context, m *Main) error {
	if c.ViewFile != "" {
		if err := state.CheckFile(c.ViewFile, 2*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "view file %s: consistent (bbolt tx.Check found nothing)\n", c.ViewFile)
		return nil
	}
	live, err := replay.ReadLive(ctx, c.client())
	if err != nil {
		return err
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	prog := termtext.NewProgress(m.Stderr, time.Now)
	v := &replay.Verify{JS: js, BatchSize: c.BatchSize, Progress: showProgress(prog), AcceptUnverified: c.AcceptUnverified,
		Normalizer: bus.ConsumerNormalizer}
	cmp, err := v.Compare(ctx, live)
	if err != nil {
		return err
	}
	if prog.Drawn() {
		prog.Finish(fmt.Sprintf("replayed %d events in %s", cmp.Replay.Events, cmp.Took.Round(time.Millisecond)))
	}
	printVerify(m.Stdout, cmp)
	res := replay.VerifyResult{Comparison: cmp}
	if c.Evidence && cmp.Seq > 0 {
		if res.Evidence, err = c.checkEvidence(ctx, v, cmp.Seq); err != nil {
			return err
		}
		printEvidence(m.Stdout, *res.Evidence)
		gaps, err := v.CheckGaps(ctx)
		if err != nil {
			return err
		}
		res.Gaps = &gaps
		printGaps(m.Stdout, gaps)
	}
	if res.Failed() {
		return exitError{1}
	}
	return nil
}

// checkEvidence checks the events up to seq against SUBSTATE_RAW, mapped
// with the worker's tenant rules.
func (c *VerifyCmd) checkEvidence(ctx context.Context, v *replay.Verify, seq uint64) (*replay.CheckResult, error) {
	rules, err := mapping.ParseTenantRules(c.TenantRule...)
	if err != nil {
		return nil, err
	}
	v.TenantRules = rules
	res, err := v.CheckEvidence(ctx, seq)
	return &res, err
}

// printEvidence prints what the evidence check found.
func printEvidence(w io.Writer, res replay.CheckResult) {
	var counts []string
	for _, o := range replay.CheckOutcomes {
		if n := res.Counts[o]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, o))
		}
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "event seq %d of tenant %q: %s: %s\n", f.Seq, f.TenantID, f.Outcome, termtext.Text(f.Reason))
	}
	fmt.Fprintf(w, "evidence of %s up to sequence %d in %s: %s\n", substate.StreamEvents, res.LastSeq, substate.StreamRaw, strings.Join(counts, ", "))
}

// printGaps prints the raw messages whose events SUBSTATE_EVENTS lacks,
// and how to map them again.
func printGaps(w io.Writer, res replay.GapResult) {
	if !res.Failed() {
		if res.LastSeq > 0 {
			fmt.Fprintf(w, "every raw message of %s from sequence %d to %d that maps to events has them in %s\n", substate.StreamRaw, res.FirstSeq, res.LastSeq, substate.StreamEvents)
		}
		return
	}
	for _, g := range res.Gaps {
		fmt.Fprintf(w, "raw message %s sequence %d (id %s, stored %s): %d of the %s it maps to are not in %s\n",
			substate.StreamRaw, g.Raw.Seq, termtext.Text(g.Raw.ID), g.Stored.UTC().Format(time.RFC3339Nano), g.Events, termtext.Plural(g.Of, "event"), substate.StreamEvents)
	}
	fmt.Fprintf(w, "%s is missing the %s of %s (its store lost them): map them again with: substate renormalize --since %s\n",
		substate.StreamEvents, termtext.Plural(res.Events, "event"), termtext.Plural(res.Count, "raw message"), res.Gaps[0].Stored.UTC().Format(time.RFC3339Nano))
}

// client is the API client of the worker being verified.
func (c *VerifyCmd) client() *httpapi.Client {
	return &httpapi.Client{URL: c.Server, APIKey: c.APIKey}
}

// printVerify prints how the live view compares with the replay.
func printVerify(w io.Writer, c replay.Comparison) {
	for _, d := range c.Diffs {
		switch d.Only {
		case "live":
			fmt.Fprintf(w, "tenant %s: in the live view only\n", termtext.Text(d.TenantID))
		case "replay":
			fmt.Fprintf(w, "tenant %s: in the replay only\n", termtext.Text(d.TenantID))
		default:
			fmt.Fprintf(w, "tenant %s differs:\n", termtext.Text(d.TenantID))
			for _, f := range d.Fields {
				fmt.Fprintf(w, "  %-22s live %s, replay %s\n", f.Field, strconv.Quote(f.Live), strconv.Quote(f.Replay))
			}
		}
	}
	if c.Moved > 0 {
		fmt.Fprintf(w, "%s changed while the live view was read and not compared\n", termtext.Plural(c.Moved, "tenant"))
	}
	if c.Replay.FirstSeq > 1 {
		fmt.Fprintf(w, "note: %s starts at sequence %d: earlier events are gone (retention), so tenants whose history began before cannot be replayed exactly\n",
			substate.StreamEvents, c.Replay.FirstSeq)
	}
	if len(c.Diffs) == 0 {
		fmt.Fprintf(w, "the live view equals the replay of %s up to sequence %d: %s\n", substate.StreamEvents, c.Seq, termtext.Plural(c.Tenants, "tenant"))
		return
	}
	fmt.Fprintf(w, "%d of %d tenants differ from the replay of %s up to sequence %d (updatedAt is not compared)\n",
		len(c.Diffs), c.Tenants, substate.StreamEvents, c.Seq)
}
