package state

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// DefaultGroupScanLimit is how many tenants a group query that counters
// cannot answer reads at most, when the DB's GroupScanLimit is 0.
const DefaultGroupScanLimit = 1_000_000

// Groups counts the tenants matching q.Filter by the values of q.By (see
// substate.GroupQuery), exactly, as committed plus what unchanged events
// hold in memory.
//
// A filter of sub-state, provider and hasError, with at most one of
// fingerprint, step and workflow type, is answered from the group
// counters when the groups are by sub-state, by provider, or by the field
// the filter names: the cost is one read per counter cell of the
// dimension (distinct value × sub-state × provider × error flag) and two
// seeks per cell of the groups returned, whatever the number of tenants.
// Any other filter (tenantPrefix, minRetryCount, inStateLongerThan, verb,
// stuck, two of fingerprint, step and workflow type, or one of them when
// grouping by another of them) reads the matching tenants from the
// narrowest index that holds them all: the stuck index, the members of
// the fingerprint, step or workflow type the filter names (the one with
// the fewest tenants in the cells the filter allows), the tenant-id range
// of the prefix, or the members of the sub-states, providers and error
// flag the filter allows, each in time-in-state order so that
// inStateLongerThan stops early. A query that would read more than GroupScanLimit tenants is
// an EINVALID error that says how to narrow it: a group count is exact or
// not given.
func (d *DB) Groups(ctx context.Context, q substate.GroupQuery) (substate.GroupPage, error) {
	if err := ctx.Err(); err != nil {
		return substate.GroupPage{}, err
	}
	limit, err := d.groupLimit(&q)
	if err != nil {
		return substate.GroupPage{}, err
	}
	g := groupQuery{q: q, limit: limit, cutoff: d.cutoff(&q.Filter)}
	g.dim, g.valued = dimOf(q.By)
	var page substate.GroupPage
	if countersServe(&q) {
		page, err = d.countGroups(&g)
	} else {
		page, err = d.walkGroups(ctx, &g)
	}
	if err != nil {
		return substate.GroupPage{}, fmt.Errorf("group tenants: %w", err)
	}
	page.By = q.By
	return page, nil
}

// countGroups answers g from the counters in one short read transaction.
func (d *DB) countGroups(g *groupQuery) (substate.GroupPage, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return substate.GroupPage{}, ErrClosed
	}
	var page substate.GroupPage
	err := d.view(func(tx *bolt.Tx) error {
		g.tx = tx
		var err error
		page, err = g.fromCounters()
		return err
	})
	return page, err
}

// groupLimit checks q and returns how many groups to answer.
func (d *DB) groupLimit(q *substate.GroupQuery) (int, error) {
	f := &q.Filter
	if _, err := substate.ParseGroupBy(string(q.By)); err != nil {
		return 0, err
	}
	switch {
	case f.SortRetryDesc || f.SortUpdatedDesc || f.Reverse || f.Limit != 0 || f.PageToken != "":
		return 0, substate.Errorf(substate.EINVALID, "a group query takes no sort, limit or page token in its filter")
	case q.Limit < 0:
		return 0, substate.Errorf(substate.EINVALID, "limit must not be negative")
	}
	if err := checkFilter(f); err != nil {
		return 0, err
	}
	if q.Limit == 0 {
		return max(min(d.DefaultLimit, d.MaxLimit), 1), nil
	}
	return max(min(q.Limit, d.MaxLimit), 1), nil
}

// countersServe reports whether the group counters answer q exactly: the
// cells of one dimension count by sub-state, provider and error flag, and
// by that dimension's value, nothing else.
func countersServe(q *substate.GroupQuery) bool {
	f := &q.Filter
	if f.TenantPrefix != "" || f.MinRetryCount != 0 || f.InStateLongerThan != 0 || f.Verb != "" || f.Stuck {
		return false
	}
	vf := valueFilters(f)
	dim, valued := dimOf(q.By)
	return len(vf) == 0 || len(vf) == 1 && (!valued || vf[0].dim == dim)
}

// valueFilter is a condition on the value of one dimension.
type valueFilter struct {
	dim   byte
	value string
}

// valueFilters returns the conditions of f on a dimension's value, in the
// order that usually goes from the fewest tenants to the most:
// fingerprint, step, workflow type.
func valueFilters(f *substate.TenantFilter) []valueFilter {
	var out []valueFilter
	for _, v := range [...]valueFilter{{dimFingerprint, f.Fingerprint}, {dimStep, f.Step}, {dimType, f.WorkflowType}} {
		if v.value != "" {
			out = append(out, v)
		}
	}
	return out
}

// groupQuery is one group query inside its read transaction.
type groupQuery struct {
	q      substate.GroupQuery
	tx     *bolt.Tx
	dim    byte
	valued bool
	limit  int
	cutoff time.Time // zero without InStateLongerThan
}

// groupAcc is one group being counted: from counter cells, or from the
// tenants a walk read.
type groupAcc struct {
	value  string
	id     valueID
	count  int64
	cells  []cellRef // the cells it was counted from (counters)
	first  time.Time
	last   time.Time // with sample: the greatest (since, tenant) seen
	sample string
}

// allows reports whether the filter lets tenants of cell c in.
func allows(f *substate.TenantFilter, c cell) bool {
	return (f.SubState == "" || c.ss == subStateCode(f.SubState)) &&
		(f.Verb == "" || c.ss == subStateCode(f.Verb.SubState())) &&
		(f.Provider == "" || c.prov == providerCode(f.Provider)) &&
		(!f.HasError || c.err == 1)
}

// fromCounters answers from the counter cells of the dimension, or of the
// dimension whose value the filter names (countersServe).
func (g *groupQuery) fromCounters() (substate.GroupPage, error) {
	f := &g.q.Filter
	dim, only := g.dim, valueID(0)
	if vf := valueFilters(f); len(vf) == 1 {
		id, ok := valueIDOf(g.tx, vf[0].dim, vf[0].value)
		if !ok {
			return substate.GroupPage{Groups: []substate.Group{}}, nil
		}
		dim, only = vf[0].dim, id
	}
	accs := map[uint64]*groupAcc{}
	var total, grouped int64
	err := forCells(g.tx, dim, f, func(ref cellRef, n int64) {
		if only != 0 && ref.id != only {
			return
		}
		total += n
		key := uint64(ref.id)
		switch {
		case g.q.By == substate.GroupBySubState:
			key = uint64(ref.c.ss)
		case g.q.By == substate.GroupByProvider:
			key = uint64(ref.c.prov)
		case ref.id == 0:
			return // no workflow type: in no group
		}
		a := accs[key]
		if a == nil {
			a = &groupAcc{id: ref.id, value: baseValue(g.q.By, ref.c)}
			accs[key] = a
		}
		a.count += n
		a.cells = append(a.cells, ref)
		grouped += n
	})
	if err == nil && dim != dimType && only == 0 {
		total, err = g.allTotal()
	}
	if err == nil && g.valued {
		err = g.names(accs)
	}
	if err != nil {
		return substate.GroupPage{}, err
	}
	top := topGroups(accs, g.limit)
	for _, a := range top {
		g.seen(a)
	}
	return pageOf(top, len(accs), total, total-grouped, 0), nil
}

// baseValue is the value of a group by sub-state or provider.
func baseValue(by substate.GroupBy, c cell) string {
	switch by {
	case substate.GroupBySubState:
		return string(subStateOf(c.ss))
	case substate.GroupByProvider:
		return string(providerOf(c.prov))
	}
	return ""
}

// forCells calls fn with every counter cell of dim the filter allows.
func forCells(tx *bolt.Tx, dim byte, f *substate.TenantFilter, fn func(ref cellRef, n int64)) error {
	prefix := []byte{dim}
	if f.SubState != "" {
		prefix = append(prefix, subStateCode(f.SubState))
	}
	c := tx.Bucket(bucketGroupCounts).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != countLen {
			return fmt.Errorf("group counter key %x is not a cell's", k)
		}
		ref := cellRef{dim: dim, c: cell{ss: k[1], prov: k[2], err: k[3]}, id: valueID(binary.BigEndian.Uint64(k[1+cellLen:]))}
		if allows(f, ref.c) {
			fn(ref, decodeCount(v))
		}
	}
	return nil
}

// allTotal is how many tenants the filter's cells hold in all: the
// workflow type dimension counts every tenant.
func (g *groupQuery) allTotal() (int64, error) {
	var total int64
	err := forCells(g.tx, dimType, &g.q.Filter, func(_ cellRef, n int64) { total += n })
	return total, err
}

// names reads the value of every group from its id.
func (g *groupQuery) names(accs map[uint64]*groupAcc) error {
	values := g.tx.Bucket(bucketGroupValues)
	for _, a := range accs {
		v := values.Get(idKey(g.dim, a.id))
		if len(v) < 8 {
			return fmt.Errorf("group value %d of dimension %d is missing", a.id, g.dim)
		}
		a.value = string(v[8:])
	}
	return nil
}

// seen fills a counted group's sample, first and last seen from the first
// and last members of each of its cells.
func (g *groupQuery) seen(a *groupAcc) {
	c := g.tx.Bucket(bucketGroupMembers).Cursor()
	for _, ref := range a.cells {
		prefix := cellPrefix(ref.dim, ref.id, ref.c)
		if k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			if _, since, ok := memberTenant(k); ok {
				a.see(since, "", false)
			}
		}
		if k := lastWithPrefix(c, prefix); k != nil {
			if tenant, since, ok := memberTenant(k); ok {
				a.see(since, tenant, true)
			}
		}
	}
}

// see widens a group's first and last seen with a member's since; a
// member that may be the sample says its tenant.
func (a *groupAcc) see(since time.Time, tenant string, sample bool) {
	if a.first.IsZero() || since.Before(a.first) {
		a.first = since
	}
	if !sample {
		return
	}
	if c := since.Compare(a.last); a.sample == "" || c > 0 || c == 0 && tenant > a.sample {
		a.last, a.sample = since, tenant
	}
}

// lastWithPrefix returns the last key of c's bucket that starts with
// prefix, nil when none does.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			end = end[:i+1]
			break
		}
		if i == 0 {
			end = nil
		}
	}
	var k []byte
	if end == nil {
		k, _ = c.Last()
	} else if k, _ = c.Seek(end); k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// valueIDOf returns the id of a value of dim, false when no tenant has
// it.
func valueIDOf(tx *bolt.Tx, dim byte, value string) (valueID, bool) {
	v := tx.Bucket(bucketGroupValues).Get(nameKey(dim, value))
	if len(v) != idLen {
		return 0, false
	}
	return valueID(binary.BigEndian.Uint64(v)), true
}

// topGroups returns the limit largest groups, equal counts by value.
func topGroups(accs map[uint64]*groupAcc, limit int) []*groupAcc {
	all := make([]*groupAcc, 0, len(accs))
	for _, a := range accs {
		all = append(all, a)
	}
	slices.SortFunc(all, func(a, b *groupAcc) int {
		return cmp.Or(cmp.Compare(b.count, a.count), strings.Compare(a.value, b.value))
	})
	return all[:min(limit, len(all))]
}

func pageOf(top []*groupAcc, groups int, total, ungrouped, scanned int64) substate.GroupPage {
	page := substate.GroupPage{Groups: make([]substate.Group, len(top)), Total: total, Ungrouped: ungrouped, GroupCount: groups, Scanned: scanned}
	for i, a := range top {
		page.Groups[i] = substate.Group{Value: a.value, Count: a.count, SampleTenantID: a.sample, FirstSeen: a.first, LastSeen: a.last}
	}
	return page
}
