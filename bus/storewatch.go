package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// storeDirs remembers the embedded server's store directories as they
// were when first seen: the store, its jetstream directory and each
// stream's directory. nats-server keeps its files open, so a store
// removed or replaced under it goes on taking writes into files that no
// longer exist, and every message it acknowledges from then on is lost
// at the next start, with nothing said. Comparing the directories with
// what they were is how the bus notices.
type storeDirs struct {
	mu   sync.Mutex
	seen map[string]os.FileInfo // by path
}

// errStoreGone is the start of the error a vanished store is reported
// with.
var errStoreGone = errors.New("nats store was deleted or replaced under the running server")

// remember records the directories that exist now and were not seen yet.
func (d *storeDirs) remember(storeDir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]os.FileInfo{}
	}
	for _, p := range storePaths(storeDir) {
		if _, ok := d.seen[p]; ok {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			d.seen[p] = fi
		}
	}
}

// storePaths are the store directory, its jetstream directory and the
// directories of the streams it holds now.
func storePaths(storeDir string) []string {
	js := filepath.Join(storeDir, "jetstream")
	out := []string{storeDir, js}
	streams, _ := filepath.Glob(filepath.Join(js, "*", "streams", "*"))
	for _, p := range streams {
		if !strings.HasPrefix(filepath.Base(p), ".") { // a stream being deleted
			out = append(out, p)
		}
	}
	return out
}

// changed returns the remembered directories that are gone or are other
// directories now, outermost first.
func (d *storeDirs) changed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for p, was := range d.seen {
		if now, err := os.Stat(p); err != nil || !os.SameFile(was, now) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	return out
}

// forget drops a directory that is gone for a reason: a stream deleted
// through the API.
func (d *storeDirs) forget(p string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, p)
}

// checkStoreDirs returns an error when a directory of the store was
// removed or replaced while the server runs. A stream's directory that is
// gone because the stream was deleted (the server no longer has it) is
// forgotten instead: that is the stream check's business.
func (b *Bus) checkStoreDirs(ctx context.Context) error {
	changed := b.dirs.changed()
	if len(changed) > 0 {
		// A look taken while the store was being moved may have seen only
		// part of it (some streams gone, their jetstream directory not
		// yet): look again, so that the outermost directory that changed
		// is the one named.
		if again := b.dirs.changed(); len(again) > 0 {
			changed = again
		}
	}
	for _, p := range changed {
		if stream, ok := streamOfDir(b.storeDir, p); ok && !b.hasStream(ctx, stream) {
			b.dirs.forget(p)
			continue
		}
		return fmt.Errorf("%w: %s is gone or is another directory now, so what the server acknowledged since is on no disk; stopped acknowledging, exiting for a restart on the store as it is", errStoreGone, p)
	}
	b.dirs.remember(b.storeDir)
	return nil
}

// streamOfDir returns the stream whose directory p is.
func streamOfDir(storeDir, p string) (string, bool) {
	rel, err := filepath.Rel(filepath.Join(storeDir, "jetstream"), p)
	if err != nil {
		return "", false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 3 || parts[1] != "streams" {
		return "", false
	}
	return parts[2], true
}

// hasStream reports whether the server still has the stream; an answer
// that does not come counts as yes, so that only a stream the server says
// is gone is taken for one deleted through the API.
func (b *Bus) hasStream(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := b.JetStream.Stream(ctx, name)
	return !errors.Is(err, jetstream.ErrStreamNotFound)
}
