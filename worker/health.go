package worker

import (
	"context"
	"fmt"
	"time"
)

// How the worker watches NATS answer: a ping every natsProbeEvery, and a
// server that has not answered within natsProbeTimeout is taken as away.
const (
	natsProbeEvery   = 500 * time.Millisecond
	natsProbeTimeout = time.Second
	// ReadyTimeout bounds the JetStream requests of one readiness check.
	ReadyTimeout = time.Second
)

// watchNATS sends the NATS server a ping every half second and keeps
// whether it answered within a second. A server that stopped answering
// (frozen, its host swapped out, a network that drops packets while the
// connection stays up) is one the worker cannot use, although its client
// counts itself connected for minutes, until its own pings give up; while
// it is so, readiness and ingest answer 503 at once instead of each
// waiting out its timeout.
func (w *Worker) watchNATS(ctx context.Context) error {
	return every(ctx, natsProbeEvery, func() {
		if !w.Bus.Conn.IsConnected() {
			w.natsStall.Store(nil) // Bus.Health says so
			return
		}
		if err := w.Bus.Conn.FlushTimeout(natsProbeTimeout); err != nil {
			stall := fmt.Errorf("nats does not answer: no reply to a ping within %s (%w)", natsProbeTimeout, err)
			if w.natsStall.Swap(&stall) == nil {
				w.Logger.Warn("nats does not answer; ingest and readiness answer 503 until it does", "err", err)
			}
			return
		}
		if w.natsStall.Swap(nil) != nil {
			w.Logger.Info("nats answers again")
		}
	})
}

// natsHealth is nil when NATS is connected, its store takes writes and
// it answered the last ping.
func (w *Worker) natsHealth() error {
	if err := w.Bus.Health(); err != nil {
		return err
	}
	if p := w.natsStall.Load(); p != nil {
		return *p
	}
	return nil
}

// natsReady reports whether ingest may publish (Ingress.Ready).
func (w *Worker) natsReady() bool { return w.natsHealth() == nil }

// Live is the liveness check: it fails once the projector has failed to
// write the view for --view-failure-timeout without one success (a
// corrupt page, a disk that stays full), which only a restart mends: at
// start a corrupt view file is moved aside and refilled.
func (w *Worker) Live() error {
	if w.Projector == nil || w.Flags.ViewFailureTimeout <= 0 {
		return nil
	}
	since, err := w.Projector.Failing()
	if err == nil {
		return nil
	}
	if d := time.Since(since); d >= w.Flags.ViewFailureTimeout {
		return fmt.Errorf("the view has not been written for %s (--view-failure-timeout %s): %w; restart the worker (at start a corrupt view file is moved aside and refilled)",
			d.Round(time.Second), w.Flags.ViewFailureTimeout, err)
	}
	return nil
}
