package state

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// Tenant returns the view of one tenant, or an ENOTFOUND error.
func (d *DB) Tenant(ctx context.Context, id string) (substate.TenantView, error) {
	rec, err := d.record(ctx, id)
	return rec.View, err
}

// LastExecution returns the id of the execution the tenant's view follows,
// also after it succeeded, when the public view no longer shows it (""
// for a tenant with no execution); an unknown tenant is ENOTFOUND.
func (d *DB) LastExecution(ctx context.Context, id string) (string, error) {
	rec, err := d.record(ctx, id)
	return rec.ExecutionID, err
}

// record returns the record of one tenant, or an ENOTFOUND error.
func (d *DB) record(ctx context.Context, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return Record{}, ErrClosed
	}
	if p, ok := d.pending[id]; ok {
		return p, nil
	}
	var rec Record
	found := false
	err := d.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTenants).Get([]byte(id))
		if v == nil {
			return nil
		}
		var err error
		rec, err = decodeRecord(id, v)
		found = err == nil
		return err
	})
	switch {
	case err != nil:
		return Record{}, fmt.Errorf("read tenant %q: %w", id, err)
	case !found:
		return Record{}, substate.Errorf(substate.ENOTFOUND, "tenant %q not found", id)
	}
	return rec, nil
}

// Tenants returns one page of the tenants that match f. The filter picks
// the index that serves it, which also fixes the order:
//
//   - SortUpdatedDesc: last change of the view, newest first.
//   - SortRetryDesc: retry count, highest first, then tenant id descending;
//     MinRetryCount ends the scan.
//   - Stuck: the stuck tenants, stuck longest first (by stuck since, then
//     tenant id).
//   - Fingerprint, else Step, else WorkflowType: the tenants with that
//     value by sub-state, provider, time in sub-state (longest first),
//     then tenant id.
//   - SubState, or Verb: that sub-state's tenants by tenant id.
//   - HasError: the tenants with an error message, by tenant id.
//   - MinRetryCount: retry count from the minimum up, then tenant id.
//   - otherwise every tenant by id.
//
// Reverse walks the same index from the other end: the same tenants, the
// ties broken the same way, in exactly the opposite order.
//
// Other conditions of f are checked on each record the index yields.
// A walk reads at most the DB's ScanLimit index keys: when the filter
// keeps few of them (a provider, or conditions another index would serve),
// the page holds fewer than its limit, possibly none, and a token to go on.
// Pages are keyset pages: a tenant that moves between indexes while a
// client pages may be missed or seen twice, never anything else.
func (d *DB) Tenants(ctx context.Context, f substate.TenantFilter) (substate.TenantPage, error) {
	if err := ctx.Err(); err != nil {
		return substate.TenantPage{}, err
	}
	limit, err := d.limit(&f)
	if err != nil {
		return substate.TenantPage{}, err
	}
	s, ok, err := d.scanFor(&f)
	if err != nil || !ok {
		return substate.TenantPage{Tenants: []substate.TenantView{}}, err
	}
	if f.Reverse {
		s.desc, s.kind = !s.desc, s.kind|kindReverse
	}
	fp := fingerprint(&f)
	var after []byte
	if f.PageToken != "" {
		t, err := decodeToken(f.PageToken)
		if err != nil || t.kind != s.kind || t.query != fp {
			return substate.TenantPage{}, errBadToken
		}
		after = t.key
	}
	views, last, more, err := d.list(ctx, s, after, limit, matcher(&f, d.cutoff(&f)))
	if err != nil {
		return substate.TenantPage{}, err
	}
	page := substate.TenantPage{Tenants: views}
	if more {
		page.NextPageToken = encodeToken(pageToken{kind: s.kind, query: fp, key: last})
	}
	return page, nil
}

// limit checks f and returns its page size.
func (d *DB) limit(f *substate.TenantFilter) (int, error) {
	if err := checkFilter(f); err != nil {
		return 0, err
	}
	switch {
	case f.Limit < 0:
		return 0, substate.Errorf(substate.EINVALID, "limit must not be negative")
	case f.SortRetryDesc && f.SortUpdatedDesc:
		return 0, substate.WrapError(substate.EINVALID, errSortTwice, "%v", errSortTwice)
	case f.Limit == 0:
		return max(min(d.DefaultLimit, d.MaxLimit), 1), nil
	}
	return max(min(f.Limit, d.MaxLimit), 1), nil
}

// Scan kinds, recorded in page tokens.
const (
	kindAll         = 1
	kindSubState    = 2
	kindError       = 3
	kindRetryUp     = 4
	kindRetryDown   = 5
	kindActive      = 6
	kindUpdatedDown = 7
	kindFingerprint = 8
	kindStuck       = 9
	kindStep        = 10
	kindType        = 11

	// kindReverse marks the walk of a kind from its other end, so that a
	// token of one direction is refused by the other.
	kindReverse = 0x80
)

// valueKinds is the scan kind of each dimension's members.
var valueKinds = [dimCount]byte{dimType: kindType, dimFingerprint: kindFingerprint, dimStep: kindStep}

// scan is a walk over one bucket's keys.
type scan struct {
	kind   byte
	bucket []byte
	prefix []byte // every key of the walk starts with it
	from   []byte // the walk's keys are at or after prefix+from
	to     []byte // and before prefix+to; nil: every key with the prefix
	desc   bool   // walk from the last key down
	id     func(k []byte) []byte
	byID   bool // keys are ordered by tenant id after prefix, so a tenant-id prefix is a seek
}

// scanFor returns the walk that serves f; false when nothing can match
// (a fingerprint no tenant has).
func (d *DB) scanFor(f *substate.TenantFilter) (scan, bool, error) {
	if f.Stuck && !f.SortUpdatedDesc && !f.SortRetryDesc {
		return scan{kind: kindStuck, bucket: bucketStuck, id: afterSince}, true, nil
	}
	if vf := valueFilters(f); len(vf) > 0 && !f.SortUpdatedDesc && !f.SortRetryDesc {
		// Always the first one, never the smallest: a page token names
		// the walk, which must be the same on every page.
		return d.valueScan(f, vf[0])
	}
	s := indexScan(f)
	if f.TenantPrefix != "" && s.byID {
		s.prefix = append(append([]byte(nil), s.prefix...), f.TenantPrefix...)
	}
	return s, true, nil
}

// valueScan walks the members of the value v names, from the sub-state
// and provider the filter names, when it names them.
func (d *DB) valueScan(f *substate.TenantFilter, v valueFilter) (scan, bool, error) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return scan{}, false, ErrClosed
	}
	var id valueID
	var ok bool
	err := d.view(func(tx *bolt.Tx) error {
		id, ok = valueIDOf(tx, v.dim, v.value)
		return nil
	})
	if err != nil || !ok {
		return scan{}, false, err
	}
	prefix := binary.BigEndian.AppendUint64([]byte{v.dim}, uint64(id))
	if ss := cmp.Or(f.SubState, f.Verb.SubState()); ss != "" {
		if prefix = append(prefix, subStateCode(ss)); f.Provider != "" {
			prefix = append(prefix, providerCode(f.Provider))
		}
	}
	return scan{kind: valueKinds[v.dim], bucket: bucketGroupMembers, prefix: prefix, id: func(k []byte) []byte {
		if len(k) <= memberHead {
			return nil
		}
		return k[memberHead:]
	}}, true, nil
}

// indexScan returns the walk of the index that serves f.
func indexScan(f *substate.TenantFilter) scan {
	switch {
	case f.SortUpdatedDesc:
		return updatedScan()
	case f.SortRetryDesc:
		return scan{kind: kindRetryDown, bucket: bucketRetry, from: retryKey(f.MinRetryCount, ""), desc: true, id: afterRetry}
	case f.SubState != "" || f.Verb != "":
		ss := cmp.Or(f.SubState, f.Verb.SubState())
		return scan{kind: kindSubState, bucket: bucketSubState, prefix: []byte{subStateCode(ss)},
			id: func(k []byte) []byte { return k[1:] }, byID: true}
	case f.HasError:
		return scan{kind: kindError, bucket: bucketError, id: func(k []byte) []byte { return k }, byID: true}
	case f.MinRetryCount > 0:
		return scan{kind: kindRetryUp, bucket: bucketRetry, from: retryKey(f.MinRetryCount, ""), id: afterRetry}
	}
	return scan{kind: kindAll, bucket: bucketTenants, id: func(k []byte) []byte { return k }, byID: true}
}

// afterSince returns the tenant id of a stuck index key; nil for a key
// too short to be one.
func afterSince(k []byte) []byte {
	if len(k) < sinceLen {
		return nil
	}
	return k[sinceLen:]
}

// afterRetry returns the tenant id of a retry index key; nil, which names
// no tenant, for a key too short to be one.
func afterRetry(k []byte) []byte {
	if len(k) < 8 {
		return nil
	}
	return k[8:]
}

// list walks s from after (exclusive; nil: from the start) and returns up
// to limit views that match, the key of the last one, and whether another
// match follows.
func (d *DB) list(ctx context.Context, s scan, after []byte, limit int, match func(*substate.TenantView) bool) (
	views []substate.TenantView, last []byte, more bool, err error,
) {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return nil, nil, false, ErrClosed
	}
	views = make([]substate.TenantView, 0, min(limit, 64))
	budget := cmp.Or(d.ScanLimit, DefaultScanLimit)
	err = d.view(func(tx *bolt.Tx) error {
		c, tenants := tx.Bucket(s.bucket).Cursor(), tx.Bucket(bucketTenants)
		n := 0
		for k := s.first(c, after); k != nil && s.within(k); k = s.step(c) {
			if n++; n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			v, err := d.viewAt(tenants, s.id(k))
			if err != nil {
				return err
			}
			if match(&v) {
				if len(views) == limit {
					more = true
					return nil
				}
				views, last = append(views, v), append(last[:0], k...)
			}
			if n >= budget {
				// A filter the index does not serve stops here: the
				// page ends early, its token resumes after k.
				more, last = true, append(last[:0], k...)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("list tenants: %w", err)
	}
	return views, last, more, nil
}

// viewAt returns the view of the tenant an index key names, with what
// pending unchanged events moved. d.pmu must be held.
func (d *DB) viewAt(tenants *bolt.Bucket, id []byte) (substate.TenantView, error) {
	return viewIn(d.pending, tenants, id)
}

// viewIn returns the view of the tenant an index key names from pending,
// else from tenants.
func viewIn(pending map[string]Record, tenants *bolt.Bucket, id []byte) (substate.TenantView, error) {
	if p, ok := pending[string(id)]; ok {
		return p.View, nil
	}
	v := tenants.Get(id)
	if v == nil {
		return substate.TenantView{}, fmt.Errorf("index names missing tenant %q", id)
	}
	rec, err := decodeRecord(string(id), v)
	if err != nil {
		return substate.TenantView{}, fmt.Errorf("tenant %q: %w", id, err)
	}
	return rec.View, nil
}

// first positions c on the first key of the walk after the key after
// (nil: the walk's first key).
func (s *scan) first(c *bolt.Cursor, after []byte) []byte {
	switch {
	case !s.desc && after == nil:
		k, _ := c.Seek(append(append([]byte(nil), s.prefix...), s.from...))
		return k
	case !s.desc:
		k, _ := c.Seek(after)
		if bytes.Equal(k, after) {
			k, _ = c.Next()
		}
		return k
	case after == nil:
		// The walk's last key is the one before the first key past it.
		if after = s.end(); after == nil {
			k, _ := c.Last()
			return k
		}
	}
	if k, _ := c.Seek(after); k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ := c.Prev()
	return k
}

// end returns the first key past the walk; nil when no key is.
func (s *scan) end() []byte {
	if s.to != nil {
		return append(append([]byte(nil), s.prefix...), s.to...)
	}
	return successor(s.prefix)
}

// successor returns the least key greater than every key that starts with
// p; nil when there is none (p is empty or all 0xff).
func successor(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			return append(append([]byte(nil), p[:i]...), p[i]+1)
		}
	}
	return nil
}

func (s *scan) step(c *bolt.Cursor) []byte {
	var k []byte
	if s.desc {
		k, _ = c.Prev()
	} else {
		k, _ = c.Next()
	}
	return k
}

// within reports whether k still belongs to the walk.
func (s *scan) within(k []byte) bool {
	if !bytes.HasPrefix(k, s.prefix) {
		return false
	}
	rest := k[len(s.prefix):]
	return bytes.Compare(rest, s.from) >= 0 && (s.to == nil || bytes.Compare(rest, s.to) < 0)
}
