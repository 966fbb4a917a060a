package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/substatehq/substate"
	bolt "go.etcd.io/bbolt"
)

// Buckets of the engine's database.
var (
	bucketWorkflows   = []byte("workflows")   // workflow name → definition key
	bucketDefinitions = []byte("definitions") // definition key → definition text
	bucketExecutions  = []byte("executions")  // execution id → record (JSON)
	bucketActive      = []byte("active")      // ids of unfinished executions
)

// store keeps workflows, definitions and executions in bbolt.
type store struct {
	db *bolt.DB
}

// openStore opens (creating) the database file and its buckets.
func openStore(path string) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open engine db: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketWorkflows, bucketDefinitions, bucketExecutions, bucketActive} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create engine buckets: %w", err)
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// definitionKey is the content address of a definition text.
func definitionKey(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// putWorkflow stores a definition under a workflow name, replacing the one
// the name had. It reports whether anything changed.
func (s *store) putWorkflow(name string, src []byte) (changed bool, err error) {
	key := definitionKey(src)
	err = s.db.Update(func(tx *bolt.Tx) error {
		w := tx.Bucket(bucketWorkflows)
		if bytes.Equal(w.Get([]byte(name)), []byte(key)) {
			return nil
		}
		changed = true
		if err := tx.Bucket(bucketDefinitions).Put([]byte(key), src); err != nil {
			return err
		}
		return w.Put([]byte(name), []byte(key))
	})
	return changed, err
}

// workflow returns a workflow's definition key and text.
func (s *store) workflow(name string) (key string, src []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		k := tx.Bucket(bucketWorkflows).Get([]byte(name))
		if k == nil {
			return substate.Errorf(substate.ENOTFOUND, "workflow %q not found", name)
		}
		key = string(k)
		src = bytes.Clone(tx.Bucket(bucketDefinitions).Get(k))
		return nil
	})
	return key, src, err
}

// definition returns a definition text by key.
func (s *store) definition(key string) (src []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		src = bytes.Clone(tx.Bucket(bucketDefinitions).Get([]byte(key)))
		if src == nil {
			return fmt.Errorf("definition %s missing", key)
		}
		return nil
	})
	return src, err
}

// deleteWorkflow forgets a workflow name. Definitions stay: executions that
// started from it still need them.
func (s *store) deleteWorkflow(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		w := tx.Bucket(bucketWorkflows)
		if w.Get([]byte(name)) == nil {
			return substate.Errorf(substate.ENOTFOUND, "workflow %q not found", name)
		}
		return w.Delete([]byte(name))
	})
}

// createExecution stores rec unless an execution with its id exists, in
// which case it returns that one and stores nothing.
func (s *store) createExecution(rec *record) (existing *record, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExecutions)
		if v := b.Get([]byte(rec.ID)); v != nil {
			existing = new(record)
			return json.Unmarshal(v, existing)
		}
		return putRecord(tx, rec)
	})
	return existing, err
}

// putExecution writes rec; the write is durable when it returns.
func (s *store) putExecution(rec *record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return putRecord(tx, rec)
	})
}

// putRecord writes rec and keeps the index of unfinished executions.
func putRecord(tx *bolt.Tx, rec *record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode execution: %w", err)
	}
	if err := tx.Bucket(bucketExecutions).Put([]byte(rec.ID), v); err != nil {
		return err
	}
	if rec.active() {
		return tx.Bucket(bucketActive).Put([]byte(rec.ID), nil)
	}
	return tx.Bucket(bucketActive).Delete([]byte(rec.ID))
}

// execution returns one execution record.
func (s *store) execution(id string) (*record, error) {
	var rec *record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketExecutions).Get([]byte(id))
		if v == nil {
			return substate.Errorf(substate.ENOTFOUND, "execution %q not found", id)
		}
		rec = new(record)
		return json.Unmarshal(v, rec)
	})
	return rec, err
}

// unfinished returns every execution that has not finished, or that still
// has events to publish.
func (s *store) unfinished() ([]*record, error) {
	var out []*record
	err := s.db.View(func(tx *bolt.Tx) error {
		execs := tx.Bucket(bucketExecutions)
		return tx.Bucket(bucketActive).ForEach(func(id, _ []byte) error {
			rec := new(record)
			if err := json.Unmarshal(execs.Get(id), rec); err != nil {
				return fmt.Errorf("decode execution %q: %w", id, err)
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}
