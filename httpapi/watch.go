package httpapi

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// DefaultKeysPoll is how often Watch looks at the key file.
const DefaultKeysPoll = 2 * time.Second

// Watch reloads the keys when the process receives SIGHUP and when the key
// file's content changes (read every poll, so a file replaced by rename or
// a Kubernetes secret update is seen too), until ctx is done. A reload that
// fails keeps the keys in force; it is logged once until the next change.
func (k *Keys) Watch(ctx context.Context, poll time.Duration, log *slog.Logger) error {
	if poll <= 0 {
		poll = DefaultKeysPoll
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(poll)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			lastErr = k.reload(log, "SIGHUP", "")
		case <-t.C:
			if k.fileChanged() {
				lastErr = k.reload(log, "key file changed", lastErr)
			}
		}
	}
}

// reload loads the keys and logs the outcome, an error only when it is
// not the one last logged; it returns the error's text.
func (k *Keys) reload(log *slog.Logger, why, lastErr string) string {
	if err := k.Load(); err != nil {
		if err.Error() != lastErr {
			log.Error("api keys not reloaded, the previous ones stay in force", "why", why, "err", err)
		}
		return err.Error()
	}
	log.Info("api keys reloaded", "why", why, "keys", k.Set().Len())
	return ""
}
