package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// What the worker does when SUBSTATE_EVENTS no longer holds what its view
// was built from (--on-stream-loss).
const (
	// StreamLossRebuild moves the view aside and refills it from what the
	// stream holds: the worker keeps running and `substate verify` agrees
	// with it, but tenants whose events were lost are gone from it.
	StreamLossRebuild = "rebuild"
	// StreamLossRefuse refuses to start, naming the rebuild command.
	StreamLossRefuse = "refuse"
)

// streamLoss says how SUBSTATE_EVENTS stopped matching the view's
// checkpoint; nil means it matches.
type streamLoss struct {
	what string // what happened, for the log line and the error
	// refill is set when the stream lost events SUBSTATE_RAW may still
	// hold (its store was cut short or created again, not retention):
	// the worker maps them again (see refill). after is the last sequence
	// the stream still holds before them, 0 when it holds none.
	refill bool
	after  uint64
}

func (l *streamLoss) Error() string { return l.what }

// eventsStream reads SUBSTATE_EVENTS's creation time and sequences.
type eventsStream struct {
	mark        string // creation time, RFC 3339 with nanoseconds
	first, last uint64
}

func readEventsStream(ctx context.Context, js jetstream.JetStream) (eventsStream, error) {
	s, err := js.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return eventsStream{}, fmt.Errorf("read %s: %w", substate.StreamEvents, err)
	}
	info := s.CachedInfo()
	return eventsStream{mark: info.Created.UTC().Format(time.RFC3339Nano), first: info.State.FirstSeq, last: info.State.LastSeq}, nil
}

// lostAfter returns the sequences after cp that the server reports lost
// from its store (garbage in a message block, found at its start): their
// events never reached the view and never will.
func lostAfter(ctx context.Context, js jetstream.JetStream, cp uint64) ([]uint64, error) {
	s, err := js.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil || info.State.Lost == nil {
		return nil, err
	}
	var out []uint64
	for _, seq := range info.State.Lost.Msgs {
		if seq > cp {
			out = append(out, seq)
		}
	}
	return out, nil
}

// compareStream says whether a view at checkpoint cp that follows the
// stream instance mark can continue on the stream as it is now: not when
// the stream was created again, ends before the checkpoint, or lost
// sequences the view never applied.
func compareStream(mark string, cp uint64, s eventsStream) *streamLoss {
	switch {
	case mark != "" && mark != s.mark:
		return &streamLoss{refill: true, what: fmt.Sprintf("%s was deleted and created again (the view follows the stream created %s, this one was created %s); the view has applied sequences up to %d of the old one, the new one holds %d",
			substate.StreamEvents, mark, s.mark, cp, s.last)}
	case cp > s.last:
		return &streamLoss{refill: true, after: s.last, what: fmt.Sprintf("%s ends at sequence %d but the view has applied up to %d: sequences %d to %d are gone (the stream's store was deleted, truncated or restored from an older copy)",
			substate.StreamEvents, s.last, cp, s.last+1, cp)}
	case cp > 0 && s.first > cp+1:
		return &streamLoss{what: fmt.Sprintf("%s starts at sequence %d but the view has applied only up to %d: sequences %d to %d were removed before the view applied them",
			substate.StreamEvents, s.first, cp, cp+1, s.first-1)}
	}
	return nil
}

// checkpointEvent says whether SUBSTATE_EVENTS still holds, at the view's
// checkpoint cp, the event the view applied there (id, "" when the view
// recorded none: then only that a canonical event is there). A stream
// that ends before cp or starts after it is compareStream's. Counting
// sequences is not enough for a store replaced by a copy: the stream's
// state can be saved later than its messages (a server running on a store
// renamed away writes it by path into the copy put in its place, its
// messages into the files it holds open), so the stream ends at the
// checkpoint without the events the view applied last; and a copy that
// took writes since holds other events at the view's sequences.
func checkpointEvent(ctx context.Context, js jetstream.JetStream, cp uint64, id string, s eventsStream) (*streamLoss, error) {
	if cp == 0 || cp < s.first || cp > s.last {
		return nil, nil
	}
	st, err := js.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", substate.StreamEvents, err)
	}
	applied := cmp.Or(id, "its id not recorded")
	m, err := st.GetMsg(ctx, cp)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		after, err := heldBefore(ctx, st, cp, s.first)
		if err != nil {
			return nil, err
		}
		return &streamLoss{refill: true, after: after, what: fmt.Sprintf("%s no longer holds the event the view applied at sequence %d (%s) though it ends at %d: sequences %d to %d are gone (the stream's store was replaced by a copy whose messages end before the view's checkpoint, e.g. one taken while the server ran)",
			substate.StreamEvents, cp, applied, s.last, after+1, cp)}, nil
	} else if err != nil {
		return nil, fmt.Errorf("read %s sequence %d, the view's checkpoint: %w", substate.StreamEvents, cp, err)
	}
	e, err := substate.UnmarshalEvent(m.Data)
	switch {
	case err != nil:
		return &streamLoss{refill: true, what: fmt.Sprintf("%s holds a message that is no canonical event where the view applied at sequence %d (%s): the stream's store was replaced by a copy that took other writes since, so the view's events from some point before its checkpoint are not in it",
			substate.StreamEvents, cp, applied)}, nil
	case id != "" && e.ID != id:
		return &streamLoss{refill: true, what: fmt.Sprintf("%s holds event %s where the view applied at sequence %d event %s: the stream's store was replaced by a copy that took other writes since, so the view's events from some point before its checkpoint are not in it",
			substate.StreamEvents, e.ID, cp, id)}, nil
	}
	return nil, nil
}

// heldBefore returns the last sequence before cp that the stream holds, 0
// when it holds none from first on.
func heldBefore(ctx context.Context, st jetstream.Stream, cp, first uint64) (uint64, error) {
	info, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", substate.StreamEvents, err)
	}
	deleted := make(map[uint64]bool, len(info.State.Deleted))
	for _, seq := range info.State.Deleted {
		deleted[seq] = true
	}
	for seq := cp - 1; seq >= max(first, 1); seq-- {
		if !deleted[seq] {
			return seq, nil
		}
	}
	return 0, nil
}

// checkStream compares the view with SUBSTATE_EVENTS at start-up. On a
// loss it logs what happened, then per --on-stream-loss moves the view
// aside and opens an empty one (rebuilt from the stream by the projector)
// or returns an error naming the rebuild command. A view that matches
// records the stream it follows.
func (w *Worker) checkStream(ctx context.Context) error {
	s, err := readEventsStream(ctx, w.Bus.JetStream)
	if err != nil {
		return err
	}
	cp, id, err := w.View.CheckpointEvent()
	if err != nil {
		return err
	}
	mark, err := w.View.StreamMark()
	if err != nil {
		return err
	}
	loss := compareStream(mark, cp, s)
	if loss == nil {
		if loss, err = checkpointEvent(ctx, w.Bus.JetStream, cp, id, s); err != nil {
			return err
		}
	}
	if loss != nil {
		w.Metrics.StreamLosses.Inc()
		if w.Flags.OnStreamLoss == StreamLossRefuse {
			return fmt.Errorf("%w; refusing to start (--on-stream-loss=refuse): %s", loss, w.refuseHint(ctx, loss))
		}
		if err := w.refill(ctx, loss); err != nil {
			return err
		}
		return w.rebuildAfterLoss(loss, s.mark)
	}
	if err := w.reportLost(ctx, cp); err != nil {
		return err
	}
	if mark != s.mark {
		return w.View.SetStreamMark(s.mark)
	}
	return nil
}

// reportLost logs the sequences after the checkpoint that the stream's
// store lost; with --on-stream-loss=refuse it refuses to start instead.
// A rebuild would not bring them back: the view goes on without them.
func (w *Worker) reportLost(ctx context.Context, cp uint64) error {
	lost, err := lostAfter(ctx, w.Bus.JetStream, cp)
	if err != nil || len(lost) == 0 {
		return err
	}
	w.Metrics.StreamLosses.Inc()
	loss := &streamLoss{refill: true, after: lost[0] - 1, what: fmt.Sprintf("%s lost %d messages from its store after the view's checkpoint %d (sequences %d to %d): their events never reached the view",
		substate.StreamEvents, len(lost), cp, lost[0], lost[len(lost)-1])}
	if w.Flags.OnStreamLoss == StreamLossRefuse {
		return fmt.Errorf("%w; refusing to start (--on-stream-loss=refuse): %s", loss, w.refuseHint(ctx, loss))
	}
	w.Logger.Error("the event stream lost events the view had not applied; mapping them again from "+substate.StreamRaw, "what", loss.what)
	return w.refill(ctx, loss)
}

// rebuildAfterLoss moves the view file aside and opens an empty view that
// follows the stream instance mark; the projector refills it from the
// stream's first sequence.
func (w *Worker) rebuildAfterLoss(loss *streamLoss, mark string) error {
	path := w.View.Path
	if err := w.View.Close(); err != nil {
		return fmt.Errorf("close the view to rebuild it: %w", err)
	}
	aside := path + ".stream-lost-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("move the view aside to rebuild it: %w", err)
	}
	if err := w.View.Open(); err != nil {
		return fmt.Errorf("open an empty view: %w", err)
	}
	w.Logger.Error("the event stream lost what the view was built from: moved the view aside and rebuilding it from what "+substate.StreamEvents+" holds (--on-stream-loss=rebuild)",
		"what", loss.what, "view", path, "moved_to", aside)
	return w.View.SetStreamMark(mark)
}

// watchStream checks SUBSTATE_EVENTS against the view every few seconds
// while the worker runs: a stream deleted, created again or moved back
// under a running view is fatal, so the worker exits non-zero and its
// restart takes the start-up check (checkStream), which rebuilds or
// refuses as --on-stream-loss says.
func (w *Worker) watchStream(ctx context.Context) error {
	t := time.NewTicker(w.streamCheckEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.compareRunning(ctx); err != nil {
			w.streamErr.Store(&err)
			return err
		}
	}
}

// compareRunning compares the running view with the stream once. A stream
// that cannot be read for a moment (NATS away) is no loss; one that is not
// found is.
func (w *Worker) compareRunning(ctx context.Context) error {
	// The view first, then the stream: the projector applies events while
	// the stream is read, so a checkpoint read after the stream's last
	// sequence can pass it with nothing lost.
	cp, err := w.View.Checkpoint(ctx)
	if err != nil {
		return nil
	}
	mark, err := w.View.StreamMark()
	if err != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := readEventsStream(cctx, w.Bus.JetStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%s was deleted under the running view; exiting so that the restart rebuilds the view or refuses (--on-stream-loss)", substate.StreamEvents)
	} else if err != nil {
		return nil
	}
	loss := compareStream(mark, cp, s)
	switch {
	case loss == nil:
	case s.mark != mark || cp > s.last:
		return fmt.Errorf("%s; exiting so that the restart rebuilds the view or refuses (--on-stream-loss)", loss)
	case w.gapFirst.Swap(s.first) != s.first:
		// Sequences the view never applied were removed (retention outran
		// the projector, or a purge): nothing brings them back, so say it
		// once per gap and go on.
		w.Metrics.StreamLosses.Inc()
		w.Logger.Error("the event stream lost events the view had not applied; going on without them", "what", loss.what)
	}
	return nil
}

// streamCheckEvery is the period of watchStream.
func (w *Worker) streamCheckEvery() time.Duration {
	if w.Flags.StreamCheckEvery > 0 {
		return w.Flags.StreamCheckEvery
	}
	return 5 * time.Second
}

// streamHealth is the readiness of the view against its stream: the loss
// watchStream found, if any.
func (w *Worker) streamHealth() error {
	if p := w.streamErr.Load(); p != nil {
		return *p
	}
	return nil
}
