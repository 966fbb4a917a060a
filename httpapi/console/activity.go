package console

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
)

// Bounds of the activity chart's reads of SUBSTATE_EVENTS.
const (
	activityWindow  = time.Hour
	activityRefresh = 5 * time.Second // an overview within this reuses the last read
	// activityBudget is the most events one refresh reads: beyond it the
	// chart starts later than an hour ago (Activity.Truncated says so
	// while the gap is within the hour).
	activityBudget = 20000
)

// Activity is the number of canonical events per minute of the last hour,
// by sub-state, from the retained SUBSTATE_EVENTS (so a restart loses
// none of it).
type Activity struct {
	Minutes   []Minute `json:"minutes"` // oldest first, one per minute, the current one last
	Truncated bool     `json:"truncated,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Minute is one minute of Activity.
type Minute struct {
	At     time.Time                 `json:"at"`
	Counts map[substate.SubState]int `json:"counts"`
}

// activity keeps per-minute counts and reads only what the stream got
// since its last read.
type activity struct {
	js     jetstream.JetStream
	now    func() time.Time
	budget int // the most events one refresh reads; 0 means activityBudget

	mu      sync.Mutex
	minutes map[int64]map[substate.SubState]int // Unix minute → counts
	lastSeq uint64
	readAt  time.Time
	// gapUntil is when the first event after the last skip was stored:
	// the chart lacks events before it while it is within the window.
	gapUntil time.Time
	err      string
}

func (a *activity) read(ctx context.Context) Activity {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if a.js != nil && now.Sub(a.readAt) >= activityRefresh {
		a.refresh(ctx, now)
	}
	out := Activity{Truncated: a.gapUntil.After(now.Add(-activityWindow)), Error: a.err, Minutes: make([]Minute, 0, 60)}
	cur := now.Unix() / 60
	for m := cur - 59; m <= cur; m++ {
		counts := a.minutes[m]
		if counts == nil {
			counts = map[substate.SubState]int{}
		}
		out.Minutes = append(out.Minutes, Minute{At: time.Unix(m*60, 0).UTC(), Counts: counts})
	}
	return out
}

// refresh reads the events stored since the last read, at most
// activityBudget of them, and forgets minutes older than the window.
func (a *activity) refresh(ctx context.Context, now time.Time) {
	r := &replay.Reader{JS: a.js, IdleTimeout: time.Second}
	first, last, _, err := r.Bounds(ctx, substate.StreamEvents)
	if err != nil {
		a.err = err.Error()
		return
	}
	a.err = ""
	if a.minutes == nil {
		a.minutes = map[int64]map[substate.SubState]int{}
	}
	from := max(a.lastSeq+1, first)
	since := now.Add(-activityWindow)
	if budget := uint64(cmp.Or(a.budget, activityBudget)); last >= budget && from < last-budget+1 {
		from = last - budget + 1
		// What is skipped is a gap in the chart only if the first event
		// read was stored within the window.
		if m, err := r.Get(ctx, substate.StreamEvents, from); err != nil {
			a.gapUntil = now
		} else if m.Stored.After(since) {
			a.gapUntil = m.Stored
		}
	}
	if last >= from {
		rg := replay.Range{FromSeq: from, ToSeq: last, Since: since}
		for m, err := range r.Messages(ctx, substate.StreamEvents, "", rg) {
			if err != nil {
				a.err = err.Error()
				break
			}
			a.count(m)
			a.lastSeq = m.Seq
		}
		if a.err == "" {
			a.lastSeq = max(a.lastSeq, last)
		}
	}
	for k := range a.minutes {
		if k < since.Unix()/60 {
			delete(a.minutes, k)
		}
	}
	a.readAt = now
}

// count adds one stored event to its minute. JSON v2 decodes the one
// field it needs in one pass over the event (encoding/json made two, and
// a page's overview reads up to activityBudget events).
func (a *activity) count(m replay.Message) {
	var ev struct {
		Data struct {
			SubState substate.SubState `json:"subState"`
		} `json:"data"`
	}
	if json.Unmarshal(m.Data, &ev, jsontext.AllowDuplicateNames(true)) != nil || !ev.Data.SubState.Valid() {
		return
	}
	k := m.Stored.Unix() / 60
	if a.minutes[k] == nil {
		a.minutes[k] = map[substate.SubState]int{}
	}
	a.minutes[k][ev.Data.SubState]++
}
