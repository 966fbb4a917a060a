package httpx

import (
	"bufio"
	"errors"
	"net/http"
	"time"
)

// Event streams gather what is written within SSEFlushWait into one write
// of up to sseBuffer bytes, so a burst costs each stream a few large
// writes rather than one system call per event, and send a comment when
// idle for SSEKeepAlive, so proxies and browsers see them alive.
const (
	SSEFlushWait = 50 * time.Millisecond
	SSEKeepAlive = 15 * time.Second
	sseBuffer    = 32 << 10
)

// EventStream writes a Server-Sent Events response, which lasts as long
// as its client reads. Every write has writeTimeout to reach the client,
// counted from the first byte buffered after a flush: a client that stops
// reading (its connection's buffers full) is closed then, instead of
// holding its connection and goroutine for good, while a stream quiet for
// longer than the timeout still sends a burst larger than its buffer.
// An EventStream is used by one goroutine.
type EventStream struct {
	rc      *http.ResponseController
	bw      *bufio.Writer
	timeout time.Duration
	due     <-chan time.Time
	keep    *time.Ticker
}

// NewEventStream starts w as an event stream: its headers, and writes
// that wait at most writeTimeout. Close ends it.
func NewEventStream(w http.ResponseWriter, writeTimeout time.Duration) *EventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	return &EventStream{rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, sseBuffer), timeout: writeTimeout}
}

// Write buffers p, to be sent by Flush; the first write after a flush
// starts the time it has (a full buffer is written at once) and the
// SSEFlushWait after which Due fires. An error is that of a write that
// waited too long, or of a client that went; Flush returns it as well.
func (s *EventStream) Write(p []byte) (int, error) {
	if s.due == nil {
		if err := s.deadline(SSEFlushWait + s.timeout); err != nil {
			return 0, err
		}
		s.due = time.After(SSEFlushWait)
	}
	return s.bw.Write(p)
}

// Due fires when what was written is to be flushed; nil when nothing is
// waiting.
func (s *EventStream) Due() <-chan time.Time { return s.due }

// KeepAlive fires every SSEKeepAlive: the stream's owner then writes a
// comment.
func (s *EventStream) KeepAlive() <-chan time.Time {
	if s.keep == nil {
		s.keep = time.NewTicker(SSEKeepAlive)
	}
	return s.keep.C
}

// Flush sends what is buffered and flushes the response, within the
// write timeout.
func (s *EventStream) Flush() error {
	s.due = nil
	if err := s.deadline(s.timeout); err != nil {
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// Close stops the stream's keep-alive ticker; the response ends when its
// handler returns.
func (s *EventStream) Close() {
	if s.keep != nil {
		s.keep.Stop()
	}
}

// deadline gives the connection's writes d from now; a response that
// cannot say (a test recorder) has none.
func (s *EventStream) deadline(d time.Duration) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(d)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
