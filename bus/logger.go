package bus

import (
	"fmt"
	"log/slog"
)

// serverLogger routes the embedded server's log lines to slog: notices at
// debug level (the server is chatty at start-up), warnings and errors as such.
type serverLogger struct{ l *slog.Logger }

func (s serverLogger) Noticef(format string, v ...any) {
	s.l.Debug(fmt.Sprintf(format, v...), "component", "nats")
}
func (s serverLogger) Warnf(format string, v ...any) {
	s.l.Warn(fmt.Sprintf(format, v...), "component", "nats")
}
func (s serverLogger) Fatalf(format string, v ...any) {
	s.l.Error(fmt.Sprintf(format, v...), "component", "nats")
}
func (s serverLogger) Errorf(format string, v ...any) {
	s.l.Error(fmt.Sprintf(format, v...), "component", "nats")
}
func (s serverLogger) Debugf(format string, v ...any) {
	s.l.Debug(fmt.Sprintf(format, v...), "component", "nats")
}
func (s serverLogger) Tracef(format string, v ...any) {
	s.l.Debug(fmt.Sprintf(format, v...), "component", "nats")
}
