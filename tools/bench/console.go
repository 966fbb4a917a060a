package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/httpapi/console"
)

// Consoles is how many open console streams the bench's console
// scenario keeps during its load.
const Consoles = 100

// ConsoleFans are open console change streams, read as browsers read them.
type ConsoleFans struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	received atomic.Int64 // changes received, each counted once
	resets   atomic.Int64 // "reset" events: the console said a stream missed changes
	repeats  atomic.Int64 // changes received again or out of order (never, if the console is right)
}

// OpenConsoleFans opens n change streams on the worker at url and waits
// until the console counts them open, so that they see every change made
// after.
func OpenConsoleFans(url string, n int) (*ConsoleFans, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &ConsoleFans{cancel: cancel}
	for range n {
		f.wg.Go(func() { f.follow(ctx, url) })
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var o console.Overview
		err := (&httpapi.Client{URL: url}).Get(ctx, "/console/api/overview", &o)
		if err == nil && o.Streams.Open >= n {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("bench: %d console streams open of %d (%v)", o.Streams.Open, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Delivered waits up to limit until the streams received want changes in
// all, closes them and returns the share they received.
func (f *ConsoleFans) Delivered(want int64, limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	for f.received.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.Close()
	if want == 0 {
		return 1
	}
	return float64(f.received.Load()) / float64(want)
}

// Close closes the streams and waits for their readers; closing again
// does nothing.
func (f *ConsoleFans) Close() {
	f.cancel()
	f.wg.Wait()
}

// Resets is how many times the console told a stream it missed changes
// (a stream dropped for being slow that came back too late to resume):
// the only way a stream may miss one.
func (f *ConsoleFans) Resets() int64 { return f.resets.Load() }

// Repeats is how many changes a stream received twice or after a later
// one: 0 when the console is right.
func (f *ConsoleFans) Repeats() int64 { return f.repeats.Load() }

// follow reads the change stream as a browser's EventSource does:
// reconnecting with Last-Event-ID when the console drops it, counting each
// change once, until ctx is done. It reads lines in place, so that the
// bench's readers (in the bench's process, their CPU counted with it)
// cost little beside the worker.
func (f *ConsoleFans) follow(ctx context.Context, url string) {
	var last uint64
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/console/api/changes", nil)
		if last != 0 {
			req.Header.Set(substate.HeaderLastEventID, strconv.FormatUint(last, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Bytes()
			if bytes.Equal(line, resetLine) {
				f.resets.Add(1)
			}
			id, ok := bytes.CutPrefix(line, idPrefix)
			if !ok {
				continue
			}
			seq, _ := strconv.ParseUint(string(id), 10, 64)
			if seq <= last {
				f.repeats.Add(1)
				continue
			}
			last = seq
			f.received.Add(1)
		}
		resp.Body.Close()
	}
}

var (
	idPrefix  = []byte("id: ")
	resetLine = []byte("event: reset")
)
