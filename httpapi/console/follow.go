package console

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// followLinger is how long the console keeps following the change feed
// after its last stream closed: a page that reconnects within it (it was
// dropped for being slow, or its network blinked) resumes where it was.
const followLinger = 30 * time.Second

// follower subscribes the console to the change feed while a page has a
// stream open, and for followLinger after the last one closed: with no
// page open, the feed's messages cost the worker nothing (they are not
// even sent to it).
type follower struct {
	conn   *nats.Conn
	onMsg  func(m *nats.Msg, gap bool) // gap: NATS may have dropped changes just before m
	forget func()                      // drops what the hub kept for resume once the console stops following
	lost   func()                      // resets the pages when NATS dropped changes the console was slow to take
	linger time.Duration

	mu     sync.Mutex
	open   int
	sub    *nats.Subscription
	timer  *time.Timer
	closed bool
}

// start counts a stream open, subscribing when it is the first. The
// subscription is known to the server when it returns, so the stream sees
// every change published after.
func (f *follower) start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open++
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if f.sub != nil || f.conn == nil || f.closed {
		return nil
	}
	sub, err := f.conn.Subscribe(substate.SubjectChangesPrefix+">", f.handler())
	if err == nil {
		err = f.conn.Flush()
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		f.open--
		return substate.WrapError(substate.EUNAVAILABLE, err, "console: subscribe to the change feed: %v", err)
	}
	// A burst the console cannot keep up with is dropped by NATS (and the
	// pages told to reload, by handler), never held against the projector.
	_ = sub.SetPendingLimits(feedPendingMsgs, 64<<20)
	f.sub = sub
	return nil
}

// feedPendingMsgs is how many change-feed messages the console's
// subscription holds before NATS drops the next ones.
var feedPendingMsgs = 65536

// handler is the subscription's message handler. When NATS has dropped
// messages since the last one, the pages miss changes that no sequence
// shows: lost closes their streams, and the message and those queued
// behind it are handed on with gap set, as the dropped ones came after
// some of them; the first message to arrive after is the first the
// console knows to follow every dropped one. A subscription's messages
// come one at a time, so its counts need no lock.
func (f *follower) handler() nats.MsgHandler {
	dropped, unsure := 0, 0
	return func(m *nats.Msg) {
		if n, err := m.Sub.Dropped(); err == nil && n != dropped {
			dropped = n
			queued, _, _ := m.Sub.Pending()
			unsure = queued + 1
			if f.lost != nil {
				f.lost()
			}
		}
		gap := unsure > 0
		if gap {
			unsure--
		}
		f.onMsg(m, gap)
	}
}

// stop counts a stream closed; after the last one the subscription ends
// once linger passes without a new stream.
func (f *follower) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open--; f.open > 0 || f.sub == nil {
		return
	}
	f.timer = time.AfterFunc(f.linger, f.idle)
}

// idle ends the subscription when still no stream is open.
func (f *follower) idle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open > 0 || f.sub == nil {
		return
	}
	f.unsubscribe()
}

// unsubscribe ends the subscription and forgets the kept changes: the
// console no longer sees every change, so a page cannot resume from them.
// f.mu must be held.
func (f *follower) unsubscribe() {
	_ = f.sub.Unsubscribe()
	f.sub = nil
	if f.forget != nil {
		f.forget()
	}
}

// close ends the subscription for good.
func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	if f.sub != nil {
		f.unsubscribe()
	}
}

// following reports whether the console is subscribed to the feed.
func (f *follower) following() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sub != nil
}
