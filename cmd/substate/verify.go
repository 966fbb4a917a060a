package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/worker"
)

// VerifyCmd is "substate verify".
type VerifyCmd struct {
	Server     string   `default:"http://127.0.0.1:8080" help:"Base URL of the running worker whose view to verify."`
	APIKey     string   `name:"api-key" help:"Read-API key of the worker, sent as Authorization: Bearer (one for every tenant: no tenant prefix)."`
	BatchSize  int      `default:"512" help:"Events per transaction of the replay."`
	Evidence   bool     `default:"true" negatable:"" help:"Also check each canonical event against its raw evidence in SUBSTATE_RAW: an event that no raw message maps to (forged, or its evidence gone) fails the check."`
	TenantRule []string `sep:"none" help:"The worker's tenant resolution rules (its --tenant-rule), to map the raw evidence as it does." placeholder:"RULE"`
	ViewFile   string   `help:"Check this view file (a stopped worker's <data-dir>/view.db) with bbolt's consistency check instead of comparing a running worker's view with the stream; a running worker checks its file when it opens it and reports a corrupt page on /readyz." type:"path" placeholder:"FILE"`

	ClientFlags `embed:""`
}

// liveView is a running worker's view as read through its HTTP API.
type liveView struct {
	from, to httpapi.ViewPosition // positions before and after reading
	tenants  []substate.TenantView
}

// Run rebuilds the view into a temporary file up to the live view's
// position and compares the two; any difference is exit status 1.
func (c *VerifyCmd) Run(ctx context.Context, m *Main) error {
	if c.ViewFile != "" {
		if err := state.CheckFile(c.ViewFile, 2*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "view file %s: consistent (bbolt tx.Check found nothing)\n", c.ViewFile)
		return nil
	}
	if err := c.checkReady(ctx); err != nil {
		return err
	}
	live, err := c.readLive(ctx)
	if err != nil {
		return err
	}
	nc, js, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	replayed, p, err := c.replay(ctx, js, live.to.Applied, m.Stderr)
	if err != nil {
		return err
	}
	moved, err := movedTenants(ctx, js, live)
	if err != nil {
		return err
	}
	diffs := withoutMoved(replay.Compare(live.tenants, replayed), moved)
	printVerify(m.Stdout, live, p, diffs, len(moved))
	failed := len(diffs) > 0
	if c.Evidence && live.to.Applied > 0 {
		res, err := c.checkEvidence(ctx, js, live.to.Applied)
		if err != nil {
			return err
		}
		printEvidence(m.Stdout, res)
		failed = failed || res.Failed()
	}
	if failed {
		return exitError{1}
	}
	return nil
}

// checkReady reads the worker's /readyz: a view it found corrupt (or
// any other reason it is not ready) fails the verification with the
// worker's own words, which name the file, the page and the rebuild
// command.
func (c *VerifyCmd) checkReady(ctx context.Context) error {
	err := c.client().Ready(ctx)
	if msg := substate.ErrorMessage(err); err != nil && strings.Contains(msg, "is corrupt") {
		return fmt.Errorf("the worker's view is not usable: %s", msg)
	}
	return nil // catching up, NATS away or no worker: the comparison below says what it can
}

// checkEvidence checks the events up to seq against SUBSTATE_RAW.
func (c *VerifyCmd) checkEvidence(ctx context.Context, js jetstream.JetStream, seq uint64) (replay.CheckResult, error) {
	rules, err := mapping.ParseTenantRules(c.TenantRule...)
	if err != nil {
		return replay.CheckResult{}, err
	}
	ch := &replay.Checker{Reader: &replay.Reader{JS: js}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, MappingVersion: mapping.Version}
	return ch.Run(ctx, replay.Range{ToSeq: seq})
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

// readLive reads every tenant of the live view between two readings of
// its position; while the view keeps moving it tries a few times, then
// accepts the window (movedTenants accounts for it).
func (c *VerifyCmd) readLive(ctx context.Context) (liveView, error) {
	var lv liveView
	client := c.client()
	for attempt := 1; ; attempt++ {
		var err error
		if lv.from, err = client.Checkpoint(ctx); err != nil {
			return lv, err
		}
		tenants, err := client.AllTenants(ctx, substate.TenantFilter{Limit: 1000})
		if err != nil {
			return lv, err
		}
		if lv.to, err = client.Checkpoint(ctx); err != nil {
			return lv, err
		}
		lv.tenants = tenants
		if lv.from.Applied == lv.to.Applied || attempt == 5 {
			return lv, nil
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// client is the API client of the worker being verified.
func (c *VerifyCmd) client() *httpapi.Client {
	return &httpapi.Client{URL: c.Server, APIKey: c.APIKey}
}

// replay rebuilds the view up to seq in a temporary file and reads it.
func (c *VerifyCmd) replay(ctx context.Context, js jetstream.JetStream, seq uint64, stderr io.Writer) ([]substate.TenantView, replay.Progress, error) {
	if seq == 0 {
		return nil, replay.Progress{}, nil // an empty view: nothing to replay
	}
	dir, err := os.MkdirTemp("", "substate-verify-")
	if err != nil {
		return nil, replay.Progress{}, err
	}
	defer os.RemoveAll(dir)
	prog := termtext.NewProgress(stderr, time.Now)
	db, p, err := worker.RebuildView(ctx, js, filepath.Join(dir, "view.db"), replay.Range{ToSeq: seq}, c.BatchSize, showProgress(prog))
	if err != nil {
		return nil, p, err
	}
	defer db.Close()
	if prog.Drawn() {
		prog.Finish(fmt.Sprintf("replayed %d events in %s", p.Events, prog.Elapsed().Round(time.Millisecond)))
	}
	views, err := worker.AllViews(ctx, db)
	return views, p, err
}

// movedTenants returns the tenants of the events the live view applied
// while it was being read: their live views may be from either side of
// the window, so they cannot be compared.
func movedTenants(ctx context.Context, js jetstream.JetStream, lv liveView) (map[string]bool, error) {
	moved := map[string]bool{}
	if lv.from.Applied == lv.to.Applied {
		return moved, nil
	}
	r := &replay.Reader{JS: js}
	for m, err := range r.Events(ctx, "", replay.Range{FromSeq: lv.from.Applied + 1, ToSeq: lv.to.Applied}) {
		if err != nil {
			return nil, err
		}
		if m.Err == nil {
			moved[m.Event.Data.TenantID] = true
		}
	}
	return moved, nil
}

func withoutMoved(diffs []replay.TenantDiff, moved map[string]bool) []replay.TenantDiff {
	out := diffs[:0]
	for _, d := range diffs {
		if !moved[d.TenantID] {
			out = append(out, d)
		}
	}
	return out
}

func printVerify(w io.Writer, lv liveView, p replay.Progress, diffs []replay.TenantDiff, moved int) {
	seq := lv.to.Applied
	for _, d := range diffs {
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
	if moved > 0 {
		fmt.Fprintf(w, "%s changed while the live view was read and not compared\n", termtext.Plural(moved, "tenant"))
	}
	if p.FirstSeq > 1 {
		fmt.Fprintf(w, "note: %s starts at sequence %d: earlier events are gone (retention), so tenants whose history began before cannot be replayed exactly\n",
			substate.StreamEvents, p.FirstSeq)
	}
	if len(diffs) == 0 {
		fmt.Fprintf(w, "the live view equals the replay of %s up to sequence %d: %s\n", substate.StreamEvents, seq, termtext.Plural(len(lv.tenants), "tenant"))
		return
	}
	fmt.Fprintf(w, "%d of %d tenants differ from the replay of %s up to sequence %d (updatedAt is not compared)\n",
		len(diffs), len(lv.tenants), substate.StreamEvents, seq)
}
