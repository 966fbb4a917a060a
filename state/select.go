package state

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/substatehq/substate"
)

// Select returns every tenant f matches (its page and sort fields are
// ignored), in tenant-id order, as of one view position: one read
// transaction and the records unchanged events hold in memory, taken
// together with the applied sequence they amount to, which is the
// Selection's Position. A fleet job freezes its set with it, and a dry run
// previews the same set. It reads the tenants from the narrowest index
// that holds them all, as a group walk does (see Groups); a set larger
// than max is an EINVALID error asking for a narrower filter, never a cut
// one.
func (d *DB) Select(ctx context.Context, f substate.TenantFilter, max int) (substate.Selection, error) {
	if err := ctx.Err(); err != nil {
		return substate.Selection{}, err
	}
	f.Limit, f.PageToken, f.SortRetryDesc, f.SortUpdatedDesc, f.Reverse = 0, "", false, false, false
	if err := checkFilter(&f); err != nil {
		return substate.Selection{}, err
	}
	var sel substate.Selection
	err := d.guard(OpRead, func() error {
		snap, err := d.snapshotAt()
		if err != nil {
			return err
		}
		defer func() { _ = snap.tx.Rollback() }()
		sel.Position = snap.seq
		g := &groupQuery{q: substate.GroupQuery{Filter: f}, tx: snap.tx, cutoff: d.cutoff(&f)}
		sel.Tenants, err = d.collect(ctx, g, snap.pending, max)
		return err
	})
	if err != nil {
		return substate.Selection{}, fmt.Errorf("select tenants: %w", err)
	}
	return sel, nil
}

// collect reads the tenants g's filter matches, at most max of them.
func (d *DB) collect(ctx context.Context, g *groupQuery, pending map[string]Record, max int) ([]substate.TenantView, error) {
	src, err := g.source(cmp.Or(d.ScanLimit, DefaultScanLimit))
	if err != nil || src == nil {
		return []substate.TenantView{}, err
	}
	budget := int64(cmp.Or(d.GroupScanLimit, DefaultGroupScanLimit))
	match := matcher(&g.q.Filter, g.cutoff)
	tenants := g.tx.Bucket(bucketTenants)
	out := []substate.TenantView{}
	var scanned int64
	err = src.walk(g.tx, g.cutoff, func(id []byte) error {
		if scanned++; scanned > budget {
			return substate.Errorf(substate.EINVALID, "this filter needs reading more than %d tenants one by one: narrow it with subState, provider, fingerprint, step or workflowType", budget)
		}
		if scanned%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		v, err := viewIn(pending, tenants, id)
		if err != nil || !match(&v) {
			return err
		}
		if len(out) == max {
			return substate.Errorf(substate.EINVALID, "the filter matches more than %d tenants: narrow it (a fingerprint, a step, a provider, a tenant prefix)", max)
		}
		out = append(out, v)
		return nil
	})
	slices.SortFunc(out, func(a, b substate.TenantView) int { return strings.Compare(a.TenantID, b.TenantID) })
	return out, err
}
