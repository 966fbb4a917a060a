package state

import (
	"encoding/binary"
	"fmt"

	"github.com/substatehq/substate"
)

// groupWork is what a write transaction's puts did to the group counters,
// saved once at its end (saveGroups), and the value ids it resolved.
type groupWork struct {
	ids    map[dimName]valueID
	cells  map[cellRef]int64
	values map[dimID]int64
}

type dimName struct {
	dim   byte
	value string
}

type dimID struct {
	dim byte
	id  valueID
}

type cellRef struct {
	dim byte
	c   cell
	id  valueID
}

func newGroupWork() *groupWork {
	return &groupWork{ids: map[dimName]valueID{}, cells: map[cellRef]int64{}, values: map[dimID]int64{}}
}

// trackGroups moves next's group members from where old had them, and
// their counts in b.groups; old is nil for a tenant not stored yet.
func (b *buckets) trackGroups(old, next *Record) error {
	if old != nil && sameGroups(&old.View, &next.View) {
		return nil
	}
	if b.groups == nil {
		b.groups = newGroupWork()
	}
	for dim := range byte(dimCount) {
		from, hadFrom, err := b.placeOf(dim, old)
		if err != nil {
			return err
		}
		to, hasTo, err := b.placeOf(dim, next)
		if err != nil {
			return err
		}
		if hadFrom == hasTo && (!hasTo || samePlace(from, to)) {
			continue
		}
		if hadFrom {
			if err := b.members.Delete(b.cut(appendMemberKey(b.arena, dim, from, old.View.TenantID))); err != nil {
				return err
			}
			b.groups.add(dim, from, -1)
		}
		if hasTo {
			if err := b.members.Put(b.cut(appendMemberKey(b.arena, dim, to, next.View.TenantID)), nil); err != nil {
				return err
			}
			b.groups.add(dim, to, +1)
		}
	}
	return nil
}

// sameGroups reports whether two views of a tenant have the same place in
// every dimension.
func sameGroups(o, n *substate.TenantView) bool {
	return cellOf(o) == cellOf(n) && o.WorkflowSubStateSince.Equal(n.WorkflowSubStateSince) &&
		o.WorkflowErrorFingerprint == n.WorkflowErrorFingerprint && o.WorkflowStep == n.WorkflowStep && o.WorkflowType == n.WorkflowType
}

func samePlace(a, b place) bool { return a.id == b.id && a.c == b.c && a.since.Equal(b.since) }

func (g *groupWork) add(dim byte, p place, n int64) {
	g.cells[cellRef{dim, p.c, p.id}] += n
	if p.id != 0 {
		g.values[dimID{dim, p.id}] += n
	}
}

// placeOf returns rec's place in dim, false when it has none there: no
// record, or no value of the fingerprint or step dimension. Every record
// has a place in the workflow type dimension, at id 0 without one.
func (b *buckets) placeOf(dim byte, rec *Record) (place, bool, error) {
	if rec == nil {
		return place{}, false, nil
	}
	p := place{c: cellOf(&rec.View), since: rec.View.WorkflowSubStateSince}
	value := dimValue(&rec.View, dim)
	switch {
	case value != "":
		var err error
		p.id, err = b.resolve(dim, value)
		return p, err == nil, err
	case dim == dimType:
		return p, true, nil
	}
	return place{}, false, nil
}

// resolve returns the id of value in dim, giving it one when it has none.
func (b *buckets) resolve(dim byte, value string) (valueID, error) {
	key := dimName{dim, value}
	if id, ok := b.groups.ids[key]; ok {
		return id, nil
	}
	var id valueID
	if v := b.values.Get(nameKey(dim, value)); len(v) == idLen {
		id = valueID(binary.BigEndian.Uint64(v))
	} else {
		seq, err := b.values.NextSequence()
		if err != nil {
			return 0, err
		}
		id = valueID(seq)
		if err := putValue(&b.values, dim, id, value, 0); err != nil {
			return 0, err
		}
	}
	b.groups.ids[key] = id
	return id, nil
}

// putValue stores the two entries of a value with its tenants.
func putValue(values *keyed, dim byte, id valueID, value string, n int64) error {
	if err := values.Put(nameKey(dim, value), binary.BigEndian.AppendUint64(nil, uint64(id))); err != nil {
		return err
	}
	return values.Put(idKey(dim, id), append(encodeCount(n), value...))
}

// saveGroups adds what the transaction's puts moved to the stored cells
// and value counts: one read and write of each cell and value touched,
// however many tenants moved. A cell or value left with no tenant is
// deleted.
func (b *buckets) saveGroups() error {
	g := b.groups
	if g == nil {
		return nil
	}
	b.groups = nil
	for ref, d := range g.cells {
		if d == 0 {
			continue
		}
		key := countKey(ref.dim, ref.c, ref.id)
		n := decodeCount(b.counts.Get(key)) + d
		var err error
		if n <= 0 {
			err = b.counts.Delete(key)
		} else {
			err = b.counts.Put(key, encodeCount(n))
		}
		if err != nil {
			return err
		}
	}
	for ref, d := range g.values {
		if err := addToValue(&b.values, ref, d); err != nil {
			return err
		}
	}
	// A value resolved but left with no tenant (its only tenant moved
	// away in the same transaction) is removed too.
	for key, id := range g.ids {
		if _, ok := g.values[dimID{key.dim, id}]; !ok {
			if err := addToValue(&b.values, dimID{key.dim, id}, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// addToValue adds d to a value's tenants, deleting it at none.
func addToValue(values *keyed, ref dimID, d int64) error {
	k := idKey(ref.dim, ref.id)
	v := values.Get(k)
	if len(v) < 8 {
		return fmt.Errorf("group value %d of dimension %d is missing", ref.id, ref.dim)
	}
	n, value := decodeCount(v)+d, string(v[8:])
	if n > 0 {
		if d == 0 {
			return nil
		}
		return values.Put(k, append(encodeCount(n), value...))
	}
	if err := values.Delete(k); err != nil {
		return err
	}
	return values.Delete(nameKey(ref.dim, value))
}
