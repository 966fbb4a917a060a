package worker

import (
	"fmt"
	"time"
)

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
