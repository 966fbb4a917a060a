package state

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// walkGroups answers a group query the counters cannot, by reading the
// matching tenants from the narrowest index that holds them all. A walk
// can read a million tenants: it holds the view's lock only while it
// opens its read transaction and copies the records unchanged events
// hold, which together are one consistent state, so commits go on while
// it reads.
func (d *DB) walkGroups(ctx context.Context, g *groupQuery) (substate.GroupPage, error) {
	var page substate.GroupPage
	err := d.guard(OpRead, func() error {
		tx, pending, err := d.snapshot()
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }() // a read transaction: nothing to undo
		g.tx = tx
		page, err = d.walk(ctx, g, pending)
		return err
	})
	return page, err
}

// snapshot opens a read transaction and copies the pending records, both
// as of the same commit.
func (d *DB) snapshot() (*bolt.Tx, map[string]Record, error) {
	s, err := d.snapshotAt()
	return s.tx, s.pending, err
}

// viewSnapshot is one consistent state of the view: a read transaction,
// the records unchanged events hold in memory on top of it, and the
// applied sequence they amount to.
type viewSnapshot struct {
	tx      *bolt.Tx
	pending map[string]Record
	seq     uint64
}

// snapshotAt opens a read transaction and copies the pending records and
// the applied sequence, all as of the same commit.
func (d *DB) snapshotAt() (viewSnapshot, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return viewSnapshot{}, ErrClosed
	}
	tx, err := d.db.Begin(false)
	if err != nil {
		return viewSnapshot{}, err
	}
	return viewSnapshot{tx: tx, pending: maps.Clone(d.pending), seq: d.seq}, nil
}

// walk reads the tenants g's filter may match and counts those it does.
func (d *DB) walk(ctx context.Context, g *groupQuery, pending map[string]Record) (substate.GroupPage, error) {
	f := &g.q.Filter
	src, err := g.source(cmp.Or(d.ScanLimit, DefaultScanLimit))
	if err != nil || src == nil {
		return substate.GroupPage{Groups: []substate.Group{}}, err
	}
	budget := int64(cmp.Or(d.GroupScanLimit, DefaultGroupScanLimit))
	match := matcher(f, g.cutoff)
	accs := map[string]*groupAcc{}
	var total, ungrouped, scanned int64
	tenants := g.tx.Bucket(bucketTenants)
	err = src.walk(g.tx, g.cutoff, func(id []byte) error {
		if scanned++; scanned > budget {
			return substate.Errorf(substate.EINVALID, "this filter needs reading more than %d tenants one by one "+
				"(tenantPrefix, minRetryCount, inStateLongerThan and verb are checked per tenant): narrow it with subState, provider, fingerprint, step or workflowType", budget)
		}
		if scanned%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		v, err := viewIn(pending, tenants, id)
		if err != nil || !match(&v) {
			return err
		}
		total++
		value := g.q.By.Value(&v)
		if value == "" {
			ungrouped++
			return nil
		}
		a := accs[value]
		if a == nil {
			a = &groupAcc{value: value}
			accs[value] = a
		}
		a.count++
		a.see(v.WorkflowSubStateSince, v.TenantID, true)
		return nil
	})
	if err != nil {
		return substate.GroupPage{}, err
	}
	byKey := make(map[uint64]*groupAcc, len(accs))
	for _, a := range accs {
		byKey[uint64(len(byKey))] = a
	}
	return pageOf(topGroups(byKey, g.limit), len(accs), total, ungrouped, scanned), nil
}

// groupSource is the key ranges of one bucket that hold every tenant a
// walk may match.
type groupSource struct {
	bucket   []byte
	prefixes [][]byte // one range per prefix
	members  bool     // keys are member keys, in time-in-sub-state order per range
	skip     int      // bytes before the tenant id in a key that is not a member key
}

// source picks the ranges a walk reads: the stuck tenants when the filter
// asks for them (few, when the SLOs are right); the members of the
// fingerprint, step or workflow type the filter names, of the one with
// the fewest tenants in the cells the filter allows when it names several;
// else the members of the cells the filter allows, unless they hold more
// than a listing scans and the tenant-id prefix range is there to read
// instead. nil means nothing can match.
func (g *groupQuery) source(small int) (*groupSource, error) {
	f := &g.q.Filter
	if f.Stuck {
		return &groupSource{bucket: bucketStuck, prefixes: [][]byte{{}}, skip: sinceLen}, nil
	}
	vf := valueFilters(f)
	named := len(vf) > 0
	if !named {
		vf = []valueFilter{{dim: dimType}} // every cell: every tenant
	}
	var best *groupSource
	var fewest int64
	for _, v := range vf {
		var only valueID
		if named {
			id, ok := valueIDOf(g.tx, v.dim, v.value)
			if !ok {
				return nil, nil
			}
			only = id
		}
		s := &groupSource{bucket: bucketGroupMembers, members: true}
		var n int64
		err := forCells(g.tx, v.dim, f, func(ref cellRef, count int64) {
			if !named || ref.id == only {
				s.prefixes = append(s.prefixes, cellPrefix(v.dim, ref.id, ref.c))
				n += count
			}
		})
		if err != nil {
			return nil, err
		}
		if best == nil || n < fewest {
			best, fewest = s, n
		}
	}
	if f.TenantPrefix != "" && !named && fewest > int64(small) {
		return &groupSource{bucket: bucketTenants, prefixes: [][]byte{[]byte(f.TenantPrefix)}}, nil
	}
	return best, nil
}

// walk calls fn with the tenant id of every key in the ranges; in member
// ranges it stops at the first tenant that entered its sub-state at or
// after cutoff, when there is one.
func (s *groupSource) walk(tx *bolt.Tx, cutoff time.Time, fn func(id []byte) error) error {
	c := tx.Bucket(s.bucket).Cursor()
	for _, prefix := range s.prefixes {
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) < s.skip {
				continue
			}
			id := k[s.skip:]
			if s.members {
				tenant, since, ok := memberTenant(k)
				if !ok {
					continue
				}
				if !cutoff.IsZero() && !since.Before(cutoff) {
					break
				}
				id = []byte(tenant)
			}
			if err := fn(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFilter reports the first invalid field of a filter's conditions.
func checkFilter(f *substate.TenantFilter) error {
	switch {
	case f.SubState != "" && !f.SubState.Valid():
		return substate.Errorf(substate.EINVALID, "unknown sub-state %q", f.SubState)
	case f.Provider != "" && providerCode(f.Provider) == 0:
		return substate.Errorf(substate.EINVALID, "unknown provider %q", f.Provider)
	case f.Verb != "" && !f.Verb.Valid():
		return substate.Errorf(substate.EINVALID, "unknown verb %q", f.Verb)
	case f.MinRetryCount < 0:
		return substate.Errorf(substate.EINVALID, "minRetryCount must not be negative")
	case f.InStateLongerThan < 0:
		return substate.Errorf(substate.EINVALID, "inStateLongerThan must not be negative")
	}
	return f.CheckLengths()
}

// cutoff is the time before which a tenant must have entered its
// sub-state to match f's InStateLongerThan; zero without one.
func (d *DB) cutoff(f *substate.TenantFilter) time.Time {
	if f.InStateLongerThan <= 0 {
		return time.Time{}
	}
	return utc(d.Now()).Add(-f.InStateLongerThan)
}

// matcher returns the check of every condition of f on a view; cutoff is
// d.cutoff(f).
func matcher(f *substate.TenantFilter, cutoff time.Time) func(*substate.TenantView) bool {
	return func(v *substate.TenantView) bool {
		return (f.SubState == "" || v.WorkflowSubState == f.SubState) &&
			(!f.HasError || v.WorkflowErrorMessage != "") &&
			v.WorkflowRetryCount >= f.MinRetryCount &&
			(f.Provider == "" || v.Provider == f.Provider) &&
			strings.HasPrefix(v.TenantID, f.TenantPrefix) &&
			(f.Fingerprint == "" || v.WorkflowErrorFingerprint == f.Fingerprint) &&
			(f.Step == "" || v.WorkflowStep == f.Step) &&
			(f.WorkflowType == "" || v.WorkflowType == f.WorkflowType) &&
			(f.Verb == "" || v.WorkflowVerb == f.Verb) &&
			(cutoff.IsZero() || v.WorkflowSubStateSince.Before(cutoff)) &&
			(!f.Stuck || v.Stuck)
	}
}
