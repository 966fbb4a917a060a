package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/substatehq/substate"
)

// What a DB was doing when it found its file corrupt (CorruptError.Op).
const (
	OpOpen  = "open"
	OpRead  = "read"
	OpWrite = "write"
	OpCheck = "check"
)

// maxCheckErrors is how many of tx.Check's findings a CorruptError keeps.
const maxCheckErrors = 5

// CorruptError says that the view file is damaged: bbolt panicked reading
// or writing one of its pages (a page of garbage makes it panic, and the
// message names the page), refused to open it, or Check found an
// inconsistency. Its message names the file and the command that rebuilds
// it from SUBSTATE_EVENTS.
type CorruptError struct {
	File   string // the view file
	Op     string // OpOpen, OpRead, OpWrite or OpCheck
	Reason string // what bbolt said, with the page when it names one
}

// Error implements the error interface.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("tenant view %s is corrupt (%s: %s); rebuild it from %s with: %s",
		e.File, e.Op, e.Reason, substate.StreamEvents, e.RebuildCommand())
}

// RebuildCommand returns the command that writes a fresh view over the
// corrupt file, to run with the worker stopped and NATS reachable.
func (e *CorruptError) RebuildCommand() string {
	return "substate rebuild --out " + shellQuote(e.File) + " --force"
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Health returns nil while the view can be read and written, and
// otherwise the *CorruptError that made it refuse writes: the first panic
// recovered from bbolt, or a failed Check. It stays set until the next
// Open succeeds; a worker's readiness check reports it.
func (d *DB) Health() error {
	if ce := d.corrupt.Load(); ce != nil {
		return ce
	}
	return nil
}

// unavailable returns what a caller of a corrupt view gets: an
// EUNAVAILABLE error whose message is safe to show (no path) and whose
// cause is the *CorruptError.
func unavailable(ce *CorruptError) error {
	return substate.WrapError(substate.EUNAVAILABLE, ce, "tenant view is unavailable: its file is corrupt")
}

// markCorrupt records ce as the reason the view is unhealthy (the first
// one stays) and returns the error to give the caller.
func (d *DB) markCorrupt(ce *CorruptError) error {
	if d.corrupt.CompareAndSwap(nil, ce) && d.Logger != nil {
		d.Logger.Error("tenant view is corrupt: reads and writes refused until it is rebuilt",
			"file", ce.File, "op", ce.Op, "reason", ce.Reason, "rebuild", ce.RebuildCommand())
	}
	return unavailable(ce)
}

// guard runs fn, which runs a bbolt transaction, and turns a panic inside
// it into an error, marking the view corrupt. A page of garbage makes
// bbolt panic (its transaction is rolled back on the way out); reading
// past the mapped file faults, which the runtime turns into a panic here
// too (debug.SetPanicOnFault) instead of killing the process.
func (d *DB) guard(op string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = d.markCorrupt(&CorruptError{File: d.Path, Op: op, Reason: fmt.Sprint(r)})
		}
	}()
	return fn()
}

// view runs fn in a read transaction, guarded.
func (d *DB) view(fn func(*bolt.Tx) error) error {
	return d.guard(OpRead, func() error { return d.db.View(fn) })
}

// read runs fn in a read transaction of the open view, holding off Close
// and the commits that change what is in memory beside the file (pending
// records, the outbox's removed and fresh changes) while it runs. A done
// ctx and a closed view (ErrClosed) are errors as they are; any other
// failure is "what: err".
func (d *DB) read(ctx context.Context, what string, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.pmu.RLock()
	defer d.pmu.RUnlock()
	if d.db == nil {
		return ErrClosed
	}
	if err := d.view(fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// update runs fn in a write transaction, guarded; a view found corrupt
// refuses every write, since bbolt's in-memory state after a panic
// cannot be trusted.
func (d *DB) update(fn func(*bolt.Tx) error) error {
	if ce := d.corrupt.Load(); ce != nil {
		return unavailable(ce)
	}
	return d.guard(OpWrite, func() error { return d.db.Update(fn) })
}

// Check runs bbolt's consistency check (tx.Check) over the whole file: it
// reads every page, so it takes time in proportion to the file, and holds
// off Apply, Sync and Close while it runs. A damaged file marks the view
// corrupt, as a panic does, and returns the *CorruptError.
func (d *DB) Check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return ErrClosed
	}
	if ce := d.check(d.db, OpCheck); ce != nil {
		d.corrupt.CompareAndSwap(nil, ce)
		return ce
	}
	return nil
}

// check runs tx.Check in a read transaction of db; no write transaction
// may run meanwhile (d.mu is held, or db is not shared yet). Every finding
// is read off the channel before the transaction ends, since the checker
// goroutine reads pages until it closes it.
func (d *DB) check(db *bolt.DB, op string) *CorruptError {
	var found []string
	n := 0
	err := d.guard(op, func() error {
		return db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				if n++; n <= maxCheckErrors {
					found = append(found, err.Error())
				}
			}
			return nil
		})
	})
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return ce
	case err != nil:
		return &CorruptError{File: d.Path, Op: op, Reason: err.Error()}
	case n == 0:
		return nil
	case n > maxCheckErrors:
		found = append(found, fmt.Sprintf("and %d more", n-maxCheckErrors))
	}
	return &CorruptError{File: d.Path, Op: op, Reason: strings.Join(found, "; ")}
}

// openError classifies an error of bolt.Open: a file bbolt does not
// recognise as a database is corrupt; anything else (permissions, the lock
// another process holds) is not.
func (d *DB) openError(err error) error {
	var ce *CorruptError
	if errors.As(err, &ce) { // bbolt panicked opening it
		return ce
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrInvalidMapping) {
		return &CorruptError{File: d.Path, Op: OpOpen, Reason: err.Error()}
	}
	return fmt.Errorf("open tenant view %s: %w", d.Path, err)
}

// Quarantine renames the corrupt view file at path out of the way, to
// path.corrupt-<UTC time>, and returns the new name: the file is kept for
// inspection, and the next Open starts an empty view at checkpoint 0,
// which the projector refills from SUBSTATE_EVENTS as it would a missing
// file.
func Quarantine(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("move corrupt tenant view aside: %w", err)
	}
	syncDir(path)
	return aside, nil
}

// syncDir fsyncs the directory of path, so a rename in it survives a
// crash; where directories cannot be synced, it does nothing.
func syncDir(path string) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return
	}
	_ = dir.Sync()
	_ = dir.Close() // a directory opened only to be synced
}

// CheckFile runs bbolt's consistency check (tx.Check) over the view file
// at path, opened read-only, without changing it: what `substate verify
// --view-file` does. A damaged file is a *CorruptError naming the file
// and the rebuild command. A file a running worker holds cannot be opened
// within timeout: that is an error saying so.
func CheckFile(path string, timeout time.Duration) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("check tenant view: %w", err)
	}
	d := &DB{Path: path}
	var db *bolt.DB
	err := d.guard(OpOpen, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("check tenant view %s: the file is locked by a running worker; stop it to check the file (a running worker checks it when it opens it, and its /readyz reports a corrupt page it meets)", path)
	}
	if err != nil {
		return d.openError(err)
	}
	defer func() { _ = db.Close() }() // opened read-only: a close loses nothing
	if ce := d.check(db, OpCheck); ce != nil {
		return ce
	}
	return nil
}
