package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	received atomic.Int64
}

// OpenConsoleFans opens n change streams on the worker at url and waits
// until the console counts them open, so that they see every change made
// after.
func OpenConsoleFans(url string, n int) (*ConsoleFans, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &ConsoleFans{cancel: cancel}
	for range n {
		f.wg.Go(func() { followChanges(ctx, url, &f.received) })
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

// followChanges reads the change stream as a browser's EventSource does:
// reconnecting with Last-Event-ID when the console drops it, counting each
// change once, until ctx is done.
func followChanges(ctx context.Context, url string, received *atomic.Int64) {
	last := ""
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/console/api/changes", nil)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				last = id
				received.Add(1)
			}
		}
		resp.Body.Close()
	}
}
