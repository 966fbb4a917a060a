package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/state"
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
	p, tenants, err := rebuildFile(ctx, js, c.Out, rg, c.BatchSize, prog.Update)
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

// rebuildFile folds the events of rg into FILE.tmp and renames it to
// file once synced; it returns the progress and the number of tenants.
func rebuildFile(ctx context.Context, js jetstream.JetStream, file string, rg replay.Range, batch int, onBatch func(replay.Progress)) (replay.Progress, int, error) {
	tmp := file + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return replay.Progress{}, 0, err
	}
	db, p, err := rebuildView(ctx, js, tmp, rg, batch, onBatch)
	if err != nil {
		os.Remove(tmp)
		return p, 0, err
	}
	n, err := countTenants(ctx, db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameSynced(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return p, n, err
}

// rebuildView folds the events of rg into a new view at path with the
// projector's code path, and returns it open and synced.
func rebuildView(ctx context.Context, js jetstream.JetStream, path string, rg replay.Range, batch int, onBatch func(replay.Progress)) (*state.DB, replay.Progress, error) {
	rb := &replay.Rebuild{Reader: &replay.Reader{JS: js}, BatchSize: batch, Progress: onBatch}
	db := state.NewDB(path)
	db.NoSync, db.Now = true, rb.Now
	if err := db.Open(); err != nil {
		return nil, replay.Progress{}, err
	}
	rb.View = db
	p, err := rb.Run(ctx, rg)
	if err == nil {
		err = db.Sync()
	}
	if err != nil {
		db.Close()
		return nil, p, err
	}
	return db, p, nil
}

// renameSynced renames tmp to file and syncs the directory, so the rename
// survives a crash.
func renameSynced(tmp, file string) error {
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	dir, err := os.Open(filepath.Dir(file))
	if err != nil {
		return nil // renamed; the directory cannot be synced on this system
	}
	defer dir.Close()
	_ = dir.Sync()
	return nil
}

// countTenants counts a view's tenants page by page.
func countTenants(ctx context.Context, v substate.ViewStore) (int, error) {
	views, err := allViews(ctx, v)
	return len(views), err
}

// allViews reads every tenant of a view.
func allViews(ctx context.Context, v substate.ViewStore) ([]substate.TenantView, error) {
	var out []substate.TenantView
	f := substate.TenantFilter{Limit: state.DefaultMaxLimit}
	for {
		page, err := v.Tenants(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Tenants...)
		if page.NextPageToken == "" {
			return out, nil
		}
		f.PageToken = page.NextPageToken
	}
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
