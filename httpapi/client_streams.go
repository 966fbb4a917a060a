package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Compile-time checks that a Client reads the streams as the worker's
// readers do.
var (
	_ substate.DeadLetterReader = (*Client)(nil)
	_ substate.EventFollower    = (*Client)(nil)
)

// DeadLetters reads one page of GET /v1/deadletters.
func (c *Client) DeadLetters(ctx context.Context, q substate.DeadLetterQuery) (substate.DeadLetterPage, error) {
	var page substate.DeadLetterPage
	err := c.Get(ctx, "/v1/deadletters?"+EncodeDeadLetterQuery(q).Encode(), &page)
	return page, err
}

// maxEventBytes bounds one event of GET /v1/events: a message of up to
// 1 MiB, with room for its framing.
const maxEventBytes = 2 << 20

// reconnects is how many times in a row FollowEvents connects again after
// the stream broke off, a second apart, before it gives up.
const reconnects = 5

// FollowEvents reads GET /v1/events until ctx is done. When the stream
// breaks off (the worker restarted, a proxy timed out) it connects again
// after the last event it read (Last-Event-ID), so nothing is skipped or
// repeated; an answer other than 200 ends it with the worker's error.
func (c *Client) FollowEvents(ctx context.Context, q substate.EventStreamQuery) iter.Seq2[substate.StoredEvent, error] {
	return func(yield func(substate.StoredEvent, error) bool) {
		failures := 0
		for {
			read, err := c.streamEvents(ctx, q, func(e substate.StoredEvent) bool {
				q.AfterSeq = e.Seq
				return yield(e, nil)
			})
			switch {
			case ctx.Err() != nil || errors.Is(err, errStopped):
				return
			case read:
				failures = 0
			}
			var serr *substate.Error
			if errors.As(err, &serr) || failures == reconnects {
				yield(substate.StoredEvent{}, err)
				return
			}
			failures++
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// errStopped is a stream whose reader stopped reading.
var errStopped = errors.New("stopped")

// streamEvents opens one stream and hands its events over until it ends;
// read says whether it was answered 200. An error event from the worker
// is returned as its error.
func (c *Client) streamEvents(ctx context.Context, q substate.EventStreamQuery, each func(substate.StoredEvent) bool) (read bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.URL, "/")+"/v1/events?"+EncodeEventStreamQuery(q).Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if q.AfterSeq > 0 {
		req.Header.Set(substate.HeaderLastEventID, strconv.FormatUint(q.AfterSeq, 10))
	}
	resp, err := cmp.Or(c.HTTPClient, http.DefaultClient).Do(req)
	if err != nil {
		return false, fmt.Errorf("ask the worker at %s (is \"substate run\" running?): %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, answerError(resp)
	}
	return true, readEvents(resp.Body, each)
}

// readEvents reads Server-Sent Events: "event" events are handed over,
// an "error" event is the worker's error, anything else is skipped.
func readEvents(r io.Reader, each func(substate.StoredEvent) bool) error {
	err := scanEvents(r, maxEventBytes, func(id, name string, data []byte) error {
		return dispatch(id, name, data, each)
	})
	if err != nil {
		return fmt.Errorf("read the event stream: %w", err)
	}
	return errors.New("the worker ended the event stream")
}

// scanEvents reads Server-Sent Events of at most limit bytes a line and
// calls each with every complete event (its data lines joined), until
// each returns an error, which it returns, or the stream ends: nil at its
// end, the read's error when it broke.
func scanEvents(r io.Reader, limit int, each func(id, name string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), limit)
	var id, name string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if err := each(id, name, data.Bytes()); err != nil {
				return err
			}
			id, name = "", ""
			data.Reset()
		case field == "id":
			id = value
		case field == "event":
			name = value
		case field == "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	return sc.Err()
}

// dispatch hands over one complete event.
func dispatch(id, name string, data []byte, each func(substate.StoredEvent) bool) error {
	switch name {
	case "event":
		seq, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return fmt.Errorf("read the event stream: event id %q is not a sequence", id)
		}
		if !each(substate.StoredEvent{Seq: seq, Data: bytes.Clone(data)}) {
			return errStopped
		}
	case "error":
		return errorOf(data)
	}
	return nil
}

// errorOf is the error of a JSON error body.
func errorOf(body []byte) error {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return substate.Errorf(substate.EINTERNAL, "the worker ended the event stream with an error it did not say")
	}
	return substate.Errorf(e.Error.Code, "%s", e.Error.Message)
}
