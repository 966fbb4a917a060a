package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/substatehq/substate"
)

// ErrClosed is returned by every method of a DB that is not open.
var ErrClosed = substate.Errorf(substate.EUNAVAILABLE, "tenant view is not open")

// Defaults of a DB made by NewDB.
const (
	DefaultLimit        = 100
	DefaultMaxLimit     = 1000
	DefaultPendingLimit = 16384
	DefaultOpenTimeout  = 5 * time.Second
)

// Compile-time check that DB is a tenant view.
var _ substate.ViewStore = (*DB)(nil)

// DB is the tenant view in one bbolt file. Set its fields before Open; it
// is safe for concurrent use once open, with one Apply at a time.
type DB struct {
	// Path is the bbolt file; its directory is created by Open.
	Path string
	// NoSync skips fsync on commit, for a rebuild into a new file that is
	// renamed into place only after Sync.
	NoSync bool
	// Now is the clock that stamps UpdatedAt.
	Now func() time.Time
	// DefaultLimit is the page size of a listing that asks for none.
	DefaultLimit int
	// MaxLimit caps the page size of a listing.
	MaxLimit int
	// ScanLimit bounds the index keys one listing reads (0 for
	// DefaultScanLimit); see Tenants.
	ScanLimit int
	// GroupScanLimit bounds the tenants one group query that counters do
	// not answer reads (0 for DefaultGroupScanLimit); see Groups.
	GroupScanLimit int
	// PendingLimit bounds how many tenants may have unchanged events held in
	// memory (see the package doc); reaching it flushes them in one commit.
	PendingLimit int
	// OpenTimeout bounds the wait for the file lock another process holds.
	OpenTimeout time.Duration
	// Logger receives the change logs, and the error MoveCorrupt logs;
	// nil discards them.
	Logger *slog.Logger
	// MoveCorrupt makes Open move a corrupt file aside (see Quarantine) and
	// open an empty view in its place, instead of returning the
	// *CorruptError.
	MoveCorrupt bool
	// ChangeOutbox makes every commit that changes a view also write its
	// changes into the change outbox (see PendingChanges), for the change
	// feed to publish.
	ChangeOutbox bool

	db      *bolt.DB
	mu      sync.Mutex                   // serializes Apply, Sync, Check and Close
	corrupt atomic.Pointer[CorruptError] // set when the file was found corrupt; see Health

	outboxReady chan struct{}                 // see ChangesWaiting
	slos        atomic.Pointer[substate.SLOs] // see SetSLOs
	deadline    deadlineState                 // see NextDeadline
	removeTimer *time.Timer                   // see RemoveChanges; guarded by pmu
	removeArmed bool                          // removeTimer is set to fire; guarded by pmu

	// pmu guards what readers see besides the file: pending, removed, seq,
	// checkpoint, stats. Apply takes it for writing only around a commit.
	pmu     sync.RWMutex
	pending map[string]Record   // unchanged-but-newer records not yet written
	removed map[uint64]struct{} // outbox changes the feed removed, still in the file
	// removedKeyed are the stuck and unstuck messages the feed removed,
	// by outbox key (see outboxKey), still in the file.
	removedKeyed map[string]struct{}
	fresh        map[uint64]substate.Change // see keepFresh
	seq          uint64                     // highest sequence applied, in memory
	seqID        string                     // the id of the event at seq, "" when unknown
	checkpoint   uint64                     // highest sequence committed
	stats        Stats
	allocated    int64 // bbolt's page bytes allocated as of the last commit
}

// Stats counts what the DB did since Open.
type Stats struct {
	Commits   uint64 // write transactions committed
	Applied   uint64 // events that changed a view
	Unchanged uint64 // newer events the dirty check found nothing to write for
	Stale     uint64 // events not newer than the view (late, duplicate, older execution)
	Skipped   uint64 // events at or below the applied sequence (redeliveries)
	Pending   int    // tenants whose unchanged events wait for the next commit
	// BytesWritten is what the commits wrote to the file: every page they
	// allocated (records, indexes, branches, the freelist) and the meta page.
	BytesWritten uint64
}

// NewDB returns a closed DB for the file at path with default settings.
func NewDB(path string) *DB {
	return &DB{
		Path:         path,
		Now:          time.Now,
		DefaultLimit: DefaultLimit,
		MaxLimit:     DefaultMaxLimit,
		PendingLimit: DefaultPendingLimit,
		OpenTimeout:  DefaultOpenTimeout,
	}
}

// Open opens or creates the file, its buckets and reads the checkpoint,
// then checks the whole file (Check). A corrupt file is a *CorruptError
// naming the file and the rebuild command; with MoveCorrupt set, Open
// moves it aside instead (Quarantine), logs where, and opens an empty view.
func (d *DB) Open() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		return errors.New("open tenant view: already open")
	}
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o700); err != nil {
		return fmt.Errorf("open tenant view: %w", err)
	}
	db, cp, err := d.openFile()
	var ce *CorruptError
	if errors.As(err, &ce) && d.MoveCorrupt {
		db, cp, err = d.reopenEmpty(ce)
	}
	if err == nil {
		d.deadline.init()
		if err = d.guard(OpOpen, func() error { return d.readDeadlineState(db) }); err != nil {
			err = errors.Join(err, closeBolt(db, err))
		}
	}
	if err != nil {
		if errors.As(err, &ce) {
			d.corrupt.CompareAndSwap(nil, ce)
		}
		return err
	}
	d.pmu.Lock()
	if d.outboxReady == nil {
		d.outboxReady = make(chan struct{}, 1)
	}
	d.deadline.init()
	d.db, d.pending, d.removed, d.removedKeyed = db, make(map[string]Record), make(map[uint64]struct{}), make(map[string]struct{})
	d.fresh = make(map[uint64]substate.Change)
	d.seq, d.checkpoint, d.stats = cp, cp, Stats{}
	d.seqID = readCheckpointEvent(db)
	d.allocated = pageAlloc(db)
	d.corrupt.Store(nil)
	d.pmu.Unlock()
	return nil
}

// openFile opens the bbolt file, creates its buckets, reads the checkpoint
// and checks the file, turning a panic of bbolt into a *CorruptError.
func (d *DB) openFile() (*bolt.DB, uint64, error) {
	var db *bolt.DB
	err := d.guard(OpOpen, func() (err error) {
		db, err = bolt.Open(d.Path, 0o600, &bolt.Options{Timeout: d.OpenTimeout, NoSync: d.NoSync})
		return err
	})
	if err != nil {
		return nil, 0, d.openError(err)
	}
	var cp uint64
	var migrate bool
	if ce := d.check(db, OpOpen); ce != nil {
		err = ce // checked before the first write, which would change the file
	} else {
		err = d.guard(OpOpen, func() error {
			return db.Update(func(tx *bolt.Tx) error { return initBuckets(tx, &cp, &migrate) })
		})
	}
	if err == nil && migrate {
		err = d.guard(OpOpen, func() error { return d.migrateGroups(db) })
	}
	if err != nil {
		err = errors.Join(err, closeBolt(db, err))
		var ce *CorruptError
		if errors.As(err, &ce) {
			return nil, 0, ce
		}
		return nil, 0, fmt.Errorf("open tenant view %s: %w", d.Path, err)
	}
	return db, cp, nil
}

// reopenEmpty moves the corrupt file aside and opens an empty view in its
// place.
func (d *DB) reopenEmpty(ce *CorruptError) (*bolt.DB, uint64, error) {
	aside, err := Quarantine(d.Path, d.Now())
	if err != nil {
		return nil, 0, errors.Join(ce, err)
	}
	if d.Logger != nil {
		d.Logger.Error("tenant view file is corrupt: moved it aside and starting an empty view, which the projector refills from "+substate.StreamEvents,
			"file", d.Path, "op", ce.Op, "reason", ce.Reason, "moved_to", aside)
	}
	return d.openFile()
}

// initBuckets creates missing buckets, checks the schema, reads the
// checkpoint into cp and says whether the group buckets must be built
// (migrateGroups).
func initBuckets(tx *bolt.Tx, cp *uint64, migrate *bool) error {
	for _, name := range [][]byte{bucketTenants, bucketSubState, bucketError, bucketRetry, bucketMeta, bucketOutbox,
		bucketGroupValues, bucketGroupCounts, bucketGroupMembers, bucketDeadlines, bucketStuck, bucketStuckCounts} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	switch v := meta.Get(keySchema); {
	case v == nil:
		if err := meta.Put(keySchema, []byte{schemaVersion}); err != nil {
			return err
		}
	case len(v) == 1 && v[0] == schemaVersion1:
		*migrate = true
	case len(v) != 1 || v[0] != schemaVersion:
		return fmt.Errorf("unsupported schema version %v (want %d)", v, schemaVersion)
	}
	if v := meta.Get(keyCheckpoint); v != nil {
		if len(v) != 8 {
			return errors.New("corrupt checkpoint")
		}
		*cp = binary.BigEndian.Uint64(v)
	}
	return initDerived(tx)
}

// Close writes what unchanged events left pending, deletes the changes the
// feed removed from the outbox, and closes the file. A
// view found corrupt writes nothing (the pending events are delivered
// again after the checkpoint) and gives bbolt closeTimeout to let go.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return nil
	}
	var err error
	if d.corrupt.Load() == nil {
		err = errors.Join(d.flush(), d.removeNow())
	}
	d.pmu.Lock()
	db := d.db
	d.db = nil
	if d.removeTimer != nil {
		d.removeTimer.Stop()
		d.removeArmed = false
	}
	d.pmu.Unlock()
	if cerr := closeBolt(db, d.Health()); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close tenant view: %w", cerr))
	}
	return err
}

// closeTimeout bounds how long Close waits for bbolt after a corrupt
// page: a panic during a write transaction's rollback can leave bbolt's
// writer lock held, and its Close would wait for it forever.
const closeTimeout = 5 * time.Second

// closeBolt closes db; after a failure (broken not nil) it waits at most
// closeTimeout.
func closeBolt(db *bolt.DB, broken error) error {
	if broken == nil {
		return db.Close()
	}
	done := make(chan error, 1)
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeTimeout):
		return errors.New("bbolt did not release the corrupt file; it stays open until the process exits")
	}
}

// Sync writes what unchanged events left pending and fsyncs the file: a
// rebuild with NoSync calls it before renaming the file into place.
func (d *DB) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return ErrClosed
	}
	if err := errors.Join(d.flush(), d.removeNow()); err != nil {
		return err
	}
	if err := d.db.Sync(); err != nil {
		return fmt.Errorf("sync tenant view: %w", err)
	}
	return nil
}

// Stats returns the counters since Open.
func (d *DB) Stats() Stats {
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	s := d.stats
	s.Pending = len(d.pending)
	return s
}

// Checkpoint returns the last stream sequence whose effects are committed.
// Sequences after it that changed nothing may already be applied in memory;
// redelivering them is harmless.
func (d *DB) Checkpoint(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return 0, ErrClosed
	}
	return d.checkpoint, nil
}

// pageAlloc returns the page bytes bbolt's transactions allocated since
// the file was opened.
func pageAlloc(db *bolt.DB) int64 {
	st := db.Stats()
	return st.TxStats.GetPageAlloc()
}

// flush commits the pending records and the applied sequence, if any are
// pending. d.mu must be held.
func (d *DB) flush() error {
	if len(d.pending) == 0 {
		return nil
	}
	_, err := d.commit(nil, d.seq, d.seqID)
	return err
}
