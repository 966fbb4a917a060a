package demorun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// The demo's live status line: on a terminal, a line under the scrolling
// changes counts the tenants by their current sub-state and is redrawn on
// every change and every half second, so the view can be watched settling.
// Elsewhere (a pipe, a file) only the change lines are written.

// statusWidth keeps the status line on one row of an 80-column terminal:
// erasing it in place only works while it does not wrap.
const statusWidth = 79

// statusLine renders the counts of tenants by current sub-state.
func (d *demoRun) statusLine() string {
	counts := map[substate.SubState]int{}
	for _, s := range d.current {
		counts[s]++
	}
	var parts []string
	for _, s := range substate.SubStates {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
		}
	}
	line := fmt.Sprintf("%6.1fs  now: %s", time.Since(d.start).Seconds(), strings.Join(parts, ", "))
	if len(line) > statusWidth {
		line = line[:statusWidth-1] + "…"
	}
	return line
}

// write prints text (whole lines while the status line is shown) and
// redraws the status line under it. The caller holds d.mu.
func (d *demoRun) write(text string) {
	if d.drawn {
		fmt.Fprint(d.out, "\r\x1b[K")
		d.drawn = false
	}
	fmt.Fprint(d.out, text)
	if d.live {
		fmt.Fprint(d.out, d.statusLine())
		d.drawn = true
	}
}

// showLive starts the status line when the output is a terminal and
// redraws it until ctx ends or stopLive is called.
func (d *demoRun) showLive(ctx context.Context) {
	if !termtext.Terminal(d.out) {
		return
	}
	d.mu.Lock()
	d.live = true
	d.write("")
	d.mu.Unlock()
	d.tick = make(chan struct{})
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.tick:
				return
			case <-t.C:
				d.mu.Lock()
				if d.live {
					d.write("")
				}
				d.mu.Unlock()
			}
		}
	}()
}

// stopLive erases the status line for good.
func (d *demoRun) stopLive() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.live {
		return
	}
	d.live = false
	close(d.tick)
	d.write("")
}
