package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// RebuildFile folds the events of rg into FILE.tmp and renames it to
// file once synced; it returns the progress and the number of tenants.
func RebuildFile(ctx context.Context, js jetstream.JetStream, file string, rg Range, batch int, onBatch func(Progress)) (Progress, int, error) {
	tmp := file + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Progress{}, 0, err
	}
	db, p, err := RebuildView(ctx, js, tmp, rg, batch, onBatch)
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

// RebuildView folds the events of rg into a new view at path with the
// projector's code path, and returns it open and synced.
func RebuildView(ctx context.Context, js jetstream.JetStream, path string, rg Range, batch int, onBatch func(Progress)) (*state.DB, Progress, error) {
	rb := &Rebuild{Reader: &Reader{JS: js}, BatchSize: batch, Progress: onBatch}
	db := state.NewDB(path)
	db.NoSync, db.Now = true, rb.Now
	if err := db.Open(); err != nil {
		return nil, Progress{}, err
	}
	rb.View = db
	p, err := rb.Run(ctx, rg)
	if err == nil {
		err = db.Sync()
	}
	if err != nil {
		return nil, p, errors.Join(err, db.Close())
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
	_ = dir.Sync()
	_ = dir.Close() // a directory opened only to be synced
	return nil
}

// countTenants counts a view's tenants page by page.
func countTenants(ctx context.Context, v substate.ViewStore) (int, error) {
	views, err := AllViews(ctx, v)
	return len(views), err
}

// AllViews reads every tenant of a view.
func AllViews(ctx context.Context, v substate.ViewStore) ([]substate.TenantView, error) {
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
