package state

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// groupBuild computes the group buckets of a set of records in memory:
// what migrateGroups writes into a file that has none, and what Verify
// compares a file's buckets with.
type groupBuild struct {
	ids    map[dimName]valueID
	names  map[dimID]string
	counts map[cellRef]int64
	values map[dimID]int64
	last   valueID
}

func newGroupBuild() *groupBuild {
	return &groupBuild{ids: map[dimName]valueID{}, names: map[dimID]string{}, counts: map[cellRef]int64{}, values: map[dimID]int64{}}
}

// add counts v in every dimension it has a place in, and appends its
// member keys to keys.
func (g *groupBuild) add(v *substate.TenantView, keys [][]byte) [][]byte {
	for dim := range byte(dimCount) {
		p := place{c: cellOf(v), since: v.WorkflowSubStateSince}
		switch value := dimValue(v, dim); {
		case value != "":
			p.id = g.id(dim, value)
			g.values[dimID{dim, p.id}]++
		case dim != dimType:
			continue
		}
		g.counts[cellRef{dim, p.c, p.id}]++
		keys = append(keys, memberKey(dim, p, v.TenantID))
	}
	return keys
}

// id returns the id of value, giving the next one to a new value.
func (g *groupBuild) id(dim byte, value string) valueID {
	if id, ok := g.ids[dimName{dim, value}]; ok {
		return id
	}
	g.last++
	g.ids[dimName{dim, value}], g.names[dimID{dim, g.last}] = g.last, value
	return g.last
}

// save writes the counts and values into the empty group buckets.
func (g *groupBuild) save(b *buckets) error {
	for ref, n := range g.counts {
		if err := b.counts.Put(countKey(ref.dim, ref.c, ref.id), encodeCount(n)); err != nil {
			return err
		}
	}
	for ref, n := range g.values {
		if err := putValue(&b.values, ref.dim, ref.id, g.names[ref], n); err != nil {
			return err
		}
	}
	return b.values.SetSequence(uint64(g.last))
}

// migrateChunk is how many records one transaction of migrateGroups reads.
const migrateChunk = 100_000

// migrateGroups builds the group buckets of a file written before they
// existed, from its records, and moves its schema to schemaVersion. It
// commits every migrateChunk records so that memory stays bounded; an
// interrupted build leaves the schema as it was and starts over at the
// next Open.
func (d *DB) migrateGroups(db *bolt.DB) error {
	start := time.Now()
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketGroupValues, bucketGroupCounts, bucketGroupMembers} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	g := newGroupBuild()
	var after []byte
	tenants := 0
	for done := false; err == nil && !done; {
		err = db.Update(func(tx *bolt.Tx) error {
			var n int
			after, n, err = migrateChunkOf(tx, g, after)
			tenants += n
			done = n < migrateChunk
			return err
		})
	}
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			b := bucketsOf(tx)
			if err := g.save(&b); err != nil {
				return err
			}
			return b.meta.Put(keySchema, []byte{schemaVersion})
		})
	}
	if err != nil {
		return fmt.Errorf("build the group indexes of %s: %w", d.Path, err)
	}
	if d.Logger != nil {
		d.Logger.Info("built the group indexes of the tenant view, once, from its records",
			"file", d.Path, "tenants", tenants, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// migrateChunkOf adds the member keys of up to migrateChunk records after
// the key after, in key order, and returns the last key read and how many
// records it read.
func migrateChunkOf(tx *bolt.Tx, g *groupBuild, after []byte) ([]byte, int, error) {
	c := tx.Bucket(bucketTenants).Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	keys := make([][]byte, 0, 4*min(migrateChunk, 1024))
	n := 0
	for ; k != nil && n < migrateChunk; k, v = c.Next() {
		rec, err := decodeRecord(string(k), v)
		if err != nil {
			return nil, 0, fmt.Errorf("tenant %q: %w", k, err)
		}
		keys = g.add(&rec.View, keys)
		after = append(after[:0], k...)
		n++
	}
	slices.SortFunc(keys, bytes.Compare) // bbolt inserts in key order fastest
	members := tx.Bucket(bucketGroupMembers)
	for _, key := range keys {
		if err := members.Put(key, nil); err != nil {
			return nil, 0, err
		}
	}
	return after, n, nil
}
